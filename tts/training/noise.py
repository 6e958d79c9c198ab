"""Lightning's messages that tell a user of these recipes nothing they can act on, filtered out.

Each is named with the reason it is noise here; anything else Lightning says still shows.
"""

from __future__ import annotations

import logging
import warnings

# Substrings of log records (Lightning's rank_zero_info) that are dropped.
DROPPED_LOG_LINES = (
    # adverts for Lightning's cloud products, printed at every start and resume
    "💡 Tip: For seamless cloud",
)

# (message regex, why) of warnings that are ignored.
IGNORED_WARNINGS = (
    # Lightning's own pytree helper still uses torch's deprecated LeafSpec; nothing a user can change
    (r".*isinstance\(treespec, LeafSpec\)` is deprecated", "torch deprecation inside Lightning"),
    # Our length-bucketing batch sampler is not a stateful loader: a resume replays the interrupted epoch's
    # batch order from its start (tts/data/sampler.py, seeded by epoch), which these recipes accept -- an
    # epoch is thousands of steps and every resume warned about it
    (r"You're resuming from a checkpoint that ended before the epoch ended", "mid-epoch resume, accepted"),
    # a resume writes into its own run's checkpoints/ (tts/training/run_dir.py refuses every other reuse)
    (r"Checkpoint directory .* exists and is not empty", "resuming into the run's own folder"),
    # the recipes choose their loader workers (data.num_workers) for a shared CPU on purpose
    (r"The '\w+_dataloader' does not have many workers", "num_workers is chosen per machine"),
)


class _DropLines(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not any(s in message for s in DROPPED_LOG_LINES)


_FILTER = _DropLines()


def quiet_lightning() -> None:
    """Install the filters (idempotent).  Called by the recipes after Hydra configured logging, so that the
    filter sits on the handlers that exist then: a logger's own filter would miss its children's records."""
    for pattern, _why in IGNORED_WARNINGS:
        warnings.filterwarnings("ignore", message=pattern)
    for name in ("", "lightning", "lightning.pytorch", "lightning.fabric"):
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
        for handler in logger.handlers:
            if _FILTER not in handler.filters:
                handler.addFilter(_FILTER)
