"""The benchmark's sentence pool and texts of a given symbol length."""

from __future__ import annotations

SENTENCES = [
    "The birch canoe slid on the smooth planks.",
    "Glue the sheet to the dark blue background.",
    "It is easy to tell the depth of a well.",
    "These days a chicken leg is a rare dish.",
    "Rice is often served in round bowls.",
    "The juice of lemons makes fine punch.",
    "The box was thrown beside the parked truck.",
    "The hogs were fed chopped corn and garbage.",
    "Four hours of steady work faced us.",
    "A large size in stockings is hard to sell.",
    "The boy was there when the sun rose.",
    "A rod is used to catch pink salmon.",
    "The source of the huge river is the clear spring.",
    "Kick the ball straight and follow through.",
    "Help the woman get back to her feet.",
    "A pot of tea helps to pass the evening.",
    "Smoky fires lack flame and heat.",
    "The soft cushion broke the man's fall.",
    "The salt breeze came across from the sea.",
    "The girl at the booth sold fifty bonds.",
    "The small pup gnawed a hole in the sock.",
    "The fish twisted and turned on the bent hook.",
    "Press the pants and sew a button on the vest.",
    "The swan dive was far short of perfect.",
    "The beauty of the view stunned the young boy.",
    "Two blue fish swam in the tank.",
    "Her purse was full of useless trash.",
    "The colt reared and threw the tall rider.",
    "It snowed, rained, and hailed the same morning.",
    "Read verse out loud for pleasure.",
    "Hoist the load to your left shoulder.",
    "Take the winding path to reach the lake.",
    "Note closely the size of the gas tank.",
    "Wipe the grease off his dirty face.",
    "Mend the coat before you go out.",
    "The wrist was badly strained and hung limp.",
    "The stray cat gave birth to kittens.",
    "The young girl gave no clear response.",
    "The meal was cooked before the bell rang.",
    "What joy there is in living.",
]
FIRST_AUDIO_TEXT = " ".join(SENTENCES[:4])


# --------------------------------------------------------------------------------------------------
# texts of a given symbol length
# --------------------------------------------------------------------------------------------------
class TextPool:
    def __init__(self, frontend) -> None:
        self.frontend = frontend
        self._cache: dict[str, list[int]] = {}

    def encode(self, s: str) -> list[int]:
        if s not in self._cache:
            self._cache[s] = self.frontend.encode(s)
        return self._cache[s]

    def text_of_length(self, n: int, offset: int = 0) -> tuple[str, list[int], list[str]]:
        """(text, exactly n symbol ids, text pieces to encode): whole pool sentences, then the words of the
        last one up to the first word that reaches n symbols; the ids are cut to exactly n."""
        used: list[str] = []
        ids: list[int] = []
        i = offset
        while len(ids) < n:
            s = SENTENCES[i % len(SENTENCES)]
            full = self.encode(s)
            if len(ids) + len(full) > n:  # cut this sentence at a word boundary
                words = s.split()
                for j in range(1, len(words) + 1):
                    part = " ".join(words[:j])
                    if len(ids) + len(self.encode(part)) >= n:
                        s, full = part, self.encode(part)
                        break
            used.append(s)
            ids = ids + full
            i += 1
        return " ".join(used), ids[:n], used
