"""Our own normalisation cases, class by class (issue 24): every expected string was read aloud as written.

The classes are those of NeMo's English test files that a reader of ordinary documents meets
(`recipes.peers.measure_nemo.DOCUMENT_CLASSES`) plus plain cardinals; the sentences are our own, not NeMo's.
"""

from __future__ import annotations

from collections import Counter

import pytest

from recipes.peers.measure_nemo import DOCUMENT_CLASSES
from tts.text.normalizer import normalize

CASES: list[tuple[str, str, str]] = [
    # telephone
    ('telephone', 'Call 555-1234 today.', 'Call five five five, one two three four today.'),
    ('telephone', 'Ring (212) 555-0187 after six.', 'Ring two one two, five five five, zero one eight seven after six.'),
    ('telephone', 'Our line is 800.555.0199.', 'Our line is eight zero zero, five five five, zero one nine nine.'),
    ('telephone', 'Dial +44 20-7946-0958 from abroad.', 'Dial plus four four, two zero, seven nine four six, zero nine five eight from abroad.'),
    ('telephone', 'Fax 1-415-555-0132 please.', 'Fax one, four one five, five five five, zero one three two please.'),
    ('telephone', 'Extension: 303-555-0145-22.', 'Extension: three zero three, five five five, zero one four five, two two.'),
    ('telephone', 'Her SSN was 078-05-1120.', 'Her SSN was zero seven eight, zero five, one one two zero.'),
    ('telephone', 'The router is at 192.168.1.254 now.', 'The router is at one nine two dot one six eight dot one dot two five four now.'),
    ('telephone', 'Call 1-800-FLOWERS now.', 'Call one, eight hundred, FLOWERS now.'),
    ('telephone', 'Phone +1 (617) 555-0123.', 'Phone plus one, six one seven, five five five, zero one two three.'),
    ('telephone', 'Try 646 555-0110.', 'Try six four six, five five five, zero one one zero.'),
    ('telephone', 'PIN 0042 unlocks it.', 'PIN zero zero four two unlocks it.'),
    ('telephone', 'Use the card ending in 4411.', 'Use the card ending in four four one one.'),
    ('telephone', 'Pages 300-1200 were missing.', 'Pages three hundred to twelve hundred were missing.'),
    # electronic
    ('electronic', 'Write to jane.doe@mail.example.org today.', 'Write to jane dot doe at mail dot example dot org today.'),
    ('electronic', 'Visit www.example.com/path for more.', 'Visit W W W dot example dot com slash path for more.'),
    ('electronic', 'user@example.com', 'user at example dot com'),
    ('electronic', 'Go to https://docs.python.org/3/library.', 'Go to H T T P S colon slash slash docs dot python dot org slash three slash library.'),
    ('electronic', 'See ftp://files.example.net/pub/readme.txt please.', 'See F T P colon slash slash files dot example dot net slash pub slash readme dot T X T please.'),
    ('electronic', 'Open example.co.uk in a browser.', 'Open example dot C O dot U K in a browser.'),
    ('electronic', 'Mail support-team@shop.io about it.', 'Mail support dash team at shop dot I O about it.'),
    ('electronic', 'The file is at file:///tmp/a_b.txt.', 'The file is at file colon slash slash slash T M P slash A underscore B dot T X T.'),
    ('electronic', 'My handle is bob_smith99@host.de.', 'My handle is bob underscore smith nine nine at host dot D E.'),
    ('electronic', 'Download it from github.com/user/repo.', 'Download it from github dot com slash user slash repo.'),
    ('electronic', 'Search https://www.bing.com/search?q=tts now.', 'Search H T T P S colon slash slash W W W dot bing dot com slash search question mark Q equals T T S now.'),
    ('electronic', 'Browse www.gov.uk.', 'Browse W W W dot gov dot U K.'),
    ('electronic', 'Send it to x@y.fr.', 'Send it to X at Y dot F R.'),
    # measure
    ('measure', 'It is 5 m/s fast.', 'It is five meters per second fast.'),
    ('measure', 'She ran 10 km.', 'She ran ten kilometers.'),
    ('measure', 'The bag weighs 1 kg.', 'The bag weighs one kilogram.'),
    ('measure', 'Add 250 ml of milk.', 'Add two hundred fifty milliliters of milk.'),
    ('measure', 'A gap of 3 cm.', 'A gap of three centimeters.'),
    ('measure', 'The river is 2.5 km wide.', 'The river is two point five kilometers wide.'),
    ('measure', 'Bake at 180°C for an hour.', 'Bake at one hundred eighty degrees Celsius for an hour.'),
    ('measure', 'It is 75°F outside.', 'It is seventy-five degrees Fahrenheit outside.'),
    ('measure', 'A 12 MB file.', 'A twelve megabytes file.'),
    ('measure', 'The link gives 100 Mbps.', 'The link gives one hundred megabits per second.'),
    ('measure', 'A room of 20 m2.', 'A room of twenty square meters.'),
    ('measure', 'He drove at 60 km/h.', 'He drove at sixty kilometers per hour.'),
    ('measure', 'Pour 4 1/2 lbs of flour.', 'Pour four and a half pounds of flour.'),
    ('measure', 'The board is 2x4 m.', 'The board is two by four meters.'),
    ('measure', 'Feed 12 kg/day.', 'Feed twelve kilograms per day.'),
    ('measure', 'The price is 3/kg.', 'The price is three per kilogram.'),
    ('measure', 'It lasts 90 min.', 'It lasts ninety minutes.'),
    ('measure', 'It is 6 ft tall.', 'It is six feet tall.'),
    ('measure', 'About 100 million kg a year.', 'About one hundred million kilograms a year.'),
    ('measure', 'Volume of 3 m3.', 'Volume of three cubic meters.'),
    ('measure', 'It has 3 tcp/ip bugs.', 'It has three tcp slash ip bugs.'),
    # roman
    ('roman', 'Read chapter XIV tonight.', 'Read chapter fourteen tonight.'),
    ('roman', "Louis XIV's palace is large.", "Louis the fourteenth's palace is large."),
    ('roman', 'Henry VIII had six wives.', 'Henry the eighth had six wives.'),
    ('roman', 'World War II ended in 1945.', 'World War two ended in nineteen forty-five.'),
    ('roman', 'Part III begins here.', 'Part three begins here.'),
    ('roman', 'Super Bowl LVII was close.', 'Super Bowl fifty-seven was close.'),
    ('roman', 'Elizabeth II reigned long.', 'Elizabeth the second reigned long.'),
    ('roman', 'Sam and I left.', 'Sam and I left.'),
    ('roman', 'Type I diabetes', 'Type one diabetes'),
    ('roman', 'Appendix D lists it.', 'Appendix D lists it.'),
    ('roman', 'Malcolm X spoke.', 'Malcolm X spoke.'),
    ('roman', 'See Volume IV.', 'See Volume four.'),
    ('roman', 'Run System V.2 here.', 'Run System V point two here.'),
    # address
    ('address', 'She lives at 42 Elm St., Apt. 7B.', 'She lives at forty-two Elm Street, apartment seven B.'),
    ('address', 'Send it to 1600 Pennsylvania Ave, Washington, DC 20500.', 'Send it to sixteen hundred Pennsylvania Avenue, Washington, D C two zero five zero zero.'),
    ('address', 'We met at 221 Baker St. It was foggy.', 'We met at two twenty-one Baker Street. It was foggy.'),
    ('address', 'Turn onto 708 N 1st St, Springfield.', 'Turn onto seven zero eight North first Street, Springfield.'),
    ('address', 'The shop is at 12 Main Rd.', 'The shop is at twelve Main Road.'),
    ('address', 'Go to 350 Fifth Ave, New York, NY 10118.', 'Go to three fifty Fifth Avenue, New York, New York one zero one one eight.'),
    ('address', 'He moved to 77 Sunset Blvd.', 'He moved to seventy-seven Sunset Boulevard.'),
    ('address', 'Mail 9 Oak Ln, Austin, TX 78701.', 'Mail nine Oak Lane, Austin, Texas seven eight seven zero one.'),
    ('address', 'St. Louis is a city.', 'saint Louis is a city.'),
    ('address', 'Walk down Main St. to the park.', 'Walk down Main street to the park.'),
    ('address', 'Park at 3100 Ocean Hwy.', 'Park at thirty-one hundred Ocean Highway.'),
    ('address', 'Office at 500 W Market St, Ste. 200.', 'Office at five hundred West Market Street, suite two hundred.'),
    # time
    ('time', 'Meet at 9:15 am.', 'Meet at nine fifteen a m.'),
    ('time', 'It starts at 14:30.', 'It starts at fourteen thirty.'),
    ('time', 'Lunch at 12:00.', "Lunch at twelve o'clock."),
    ('time', 'The shop opens at 7 a.m.', 'The shop opens at seven a m.'),
    ('time', 'It ended at 1:59 p.m. EST.', 'It ended at one fifty-nine p m E S T.'),
    ('time', 'The record was 1:02:03.', 'The record was one hour two minutes and three seconds.'),
    ('time', 'Open 9am-5pm daily.', 'Open nine a m to five p m daily.'),
    ('time', 'From 8:00 - 17:00 only.', "From eight o'clock to seventeen hundred only."),
    ('time', 'At 3.45 pm we left.', 'At three forty-five p m we left.'),
    ('time', 'The train left at 6:05.', 'The train left at six oh five.'),
    ('time', 'Call at 10 PM PST.', 'Call at ten p m P S T.'),
    ('time', 'It took 00:45:10 in all.', 'It took zero hours forty-five minutes and ten seconds in all.'),
    # date
    ('date', 'Born on July 4, 1776.', 'Born on July fourth, seventeen seventy-six.'),
    ('date', 'It was 2021-03-15.', 'It was March fifteenth, twenty twenty-one.'),
    ('date', 'Due 12/25/2024.', 'Due December twenty-fifth, twenty twenty-four.'),
    ('date', 'On 25/12/2024 we rest.', 'On the twenty-fifth of December, twenty twenty-four we rest.'),
    ('date', 'The 3rd of May was sunny.', 'The third of May was sunny.'),
    ('date', 'We met on 5 June 2019.', 'We met on the fifth of June, twenty nineteen.'),
    ('date', 'See you Jan 1.', 'See you January first.'),
    ('date', 'Sales rose in Q3 2023.', 'Sales rose in the third quarter of twenty twenty-three.'),
    ('date', 'Profit in 4Q21 fell.', 'Profit in the fourth quarter of twenty-one fell.'),
    ('date', 'Rome fell in 476 AD.', 'Rome fell in four seventy-six A D.'),
    ('date', 'The 1990s were loud.', 'The nineteen nineties were loud.'),
    ('date', "In the '80s it was fine.", 'In the eighties it was fine.'),
    ('date', 'Around 15.01.2020 it snowed.', 'Around the fifteenth of January, twenty twenty it snowed.'),
    ('date', 'By SEPT. 30 it ended.', 'By September thirtieth it ended.'),
    ('date', 'The deadline is march 3, 2022.', 'The deadline is March third, twenty twenty-two.'),
    ('date', 'You may 5 times.', 'You may five times.'),
    ('date', 'He was born in 1905.', 'He was born in nineteen oh five.'),
    ('date', 'It was 1066.', 'It was ten sixty-six.'),
    ('date', 'Jan-15-2020 was a Wednesday.', 'January fifteenth, twenty twenty was a Wednesday.'),
    ('date', 'On the 26th May we left.', 'On the twenty-sixth of May we left.'),
    # money
    ('money', 'It costs $5.', 'It costs five dollars.'),
    ('money', 'It costs $1.', 'It costs one dollar.'),
    ('money', 'Pay $3.50 now.', 'Pay three dollars and fifty cents now.'),
    ('money', 'Only $0.99!', 'Only ninety-nine cents!'),
    ('money', 'A $2.5 million deal.', 'A two point five million dollars deal.'),
    ('money', 'It costs £20.', 'It costs twenty pounds.'),
    ('money', 'Ticket: €15.75.', 'Ticket: fifteen euros and seventy-five cents.'),
    ('money', 'It was ¥300 b.', 'It was three hundred billion yen.'),
    ('money', 'It cost ₩5000.', 'It cost five thousand won.'),
    ('money', 'About US$4 billion.', 'About four billion US dollars.'),
    ('money', 'It is $20/mo.', 'It is twenty dollars per month.'),
    ('money', 'Pay £10/wk.', 'Pay ten pounds per week.'),
    ('money', 'Rent $1,200.00 monthly.', 'Rent one thousand two hundred dollars monthly.'),
    ('money', 'A $0.010 fee.', 'A one cent fee.'),
    ('money', 'Pay 50¢.', 'Pay fifty cents.'),
    ('money', 'Prices $5-$10 apply.', 'Prices five dollars to ten dollars apply.'),
    ('money', 'It costs 30€.', 'It costs thirty euros.'),
    ('money', 'Fee: $20.500.', 'Fee: twenty dollars and fifty cents.'),
    # ordinal
    ('ordinal', 'He came 1st.', 'He came first.'),
    ('ordinal', 'She was 2nd.', 'She was second.'),
    ('ordinal', 'The 3rd try.', 'The third try.'),
    ('ordinal', 'The 11th hour.', 'The eleventh hour.'),
    ('ordinal', 'Our 12th year.', 'Our twelfth year.'),
    ('ordinal', 'The 13th floor.', 'The thirteenth floor.'),
    ('ordinal', 'The 21st century.', 'The twenty-first century.'),
    ('ordinal', 'His 22nd birthday.', 'His twenty-second birthday.'),
    ('ordinal', 'The 101st time.', 'The one hundred first time.'),
    ('ordinal', 'The 1,000th visitor.', 'The one thousandth visitor.'),
    ('ordinal', 'A 21th entry.', 'A twenty-one t h entry.'),
    ('ordinal', 'The 2th line.', 'The two t h line.'),
    # fraction
    ('fraction', 'Use 1/2 cup.', 'Use one half cup.'),
    ('fraction', 'Add 3/4 cup.', 'Add three quarters cup.'),
    ('fraction', 'It took 2 1/2 hours.', 'It took two and a half hours.'),
    ('fraction', 'About 1/3 of them.', 'About one third of them.'),
    ('fraction', 'Cut 5/8 inch.', 'Cut five eighths inch.'),
    ('fraction', 'Only 1/10 remain.', 'Only one tenth remain.'),
    ('fraction', 'It is 7/16 wide.', 'It is seven sixteenths wide.'),
    ('fraction', 'Take 1/4th of it.', 'Take one quarter of it.'),
    ('fraction', 'Open 24/7.', 'Open twenty-four seven.'),
    ('fraction', "It's 3 3/4 long.", "It's three and three quarters long."),
    ('fraction', 'Ratio 22/7 works.', 'Ratio twenty-two sevenths works.'),
    ('fraction', 'Round 2/3rd.', 'Round two thirds.'),
    # range
    ('range', 'Read pages 10-20.', 'Read pages ten to twenty.'),
    ('range', 'From 1990-1995 it grew.', 'From nineteen ninety to nineteen ninety-five it grew.'),
    ('range', 'Walk 5-10 km daily.', 'Walk five to ten kilometers daily.'),
    ('range', 'It cost $50-$100.', 'It cost fifty dollars to one hundred dollars.'),
    ('range', 'In the 1960s-80s.', 'In the nineteen sixties to eighties.'),
    ('range', 'It was 1960-80.', 'It was nineteen sixty to eighty.'),
    ('range', 'Ages 3-5 play here.', 'Ages three to five play here.'),
    ('range', 'They won 3-1.', 'They won three to one.'),
    ('range', 'Temps of 10-15°C.', 'Temps of ten to fifteen degrees Celsius.'),
    ('range', 'Between 2:00 pm-4:30 pm.', 'Between two p m to four thirty p m.'),
    ('range', 'Solve 7-3=4.', 'Solve seven minus three equals four.'),
    ('range', 'Weights of 1000-1200 kg.', 'Weights of one thousand to one thousand two hundred kilograms.'),
    # cardinal
    ('cardinal', 'I have 5 apples.', 'I have five apples.'),
    ('cardinal', 'There are 1,234 people.', 'There are one thousand two hundred thirty-four people.'),
    ('cardinal', 'Over 20000 fans came.', 'Over twenty thousand fans came.'),
    ('cardinal', 'Order 58213 shipped.', 'Order five eight two one three shipped.'),
    ('cardinal', 'It is about 30999 miles.', 'It is about thirty thousand nine hundred ninety-nine miles.'),
    ('cardinal', 'It was -7 today.', 'It was minus seven today.'),
    ('cardinal', 'A 0.5 chance.', 'A zero point five chance.'),
    ('cardinal', 'Room 007 is empty.', 'Room zero zero seven is empty.'),
    ('cardinal', 'We sold 3.14 tons.', 'We sold three point one four tons.'),
    ('cardinal', 'A depth of -232323 units.', 'A depth of minus two hundred thirty-two thousand three hundred twenty-three units.'),
    ('cardinal', 'About 1,234,567,890,123,456,789 grains.', 'About one quintillion two hundred thirty-four quadrillion five hundred sixty-seven trillion eight hundred ninety billion one hundred twenty-three million four hundred fifty-six thousand seven hundred eighty-nine grains.'),
    ('cardinal', 'Serial 1234567890123456789 here.', 'Serial one two three four five six seven eight nine zero one two three four five six seven eight nine here.'),
    ('fraction', 'I am in a PDP 11/70!', 'I am in a PDP eleven slash seventy!'),
    ('fraction', 'A PDP-11/24 board.', 'A PDP-eleven slash twenty-four board.'),
    ('date', 'The card expires 09/2025.', 'The card expires September twenty twenty-five.'),
]


@pytest.mark.parametrize(("cls", "text", "expected"), CASES, ids=[f"{c[0]}:{c[1][:40]}" for c in CASES])
def test_case(cls: str, text: str, expected: str) -> None:
    assert normalize(text) == expected


def test_at_least_150_cases_and_every_document_class_covered() -> None:
    per_class = Counter(c[0] for c in CASES)
    assert len(CASES) >= 150
    assert {cls: per_class[cls] for cls in DOCUMENT_CLASSES if per_class[cls] < 8} == {}


@pytest.mark.parametrize(
    ("text", "expected"),
    [  # the examples of issue 24, each of which was read wrongly before
        ("Call 555-1234", "Call five five five, one two three four"),
        ("chapter XIV", "chapter fourteen"),
        ("Louis XIV's", "Louis the fourteenth's"),
        ("42 Elm St., Apt. 7B", "forty-two Elm Street, apartment seven B"),
        ("5 m/s", "five meters per second"),
        ("www.example.com/path", "W W W dot example dot com slash path"),
        ("user@example.com", "user at example dot com"),
    ],
)
def test_issue_examples(text: str, expected: str) -> None:
    assert normalize(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [  # look-alikes that must keep their ordinary reading
        ("Then I left.", "Then I left."),
        ("the book I read", "the book I read"),
        ("Type C cable", "Type C cable"),
        ("Henry V won.", "Henry V won."),
        ("You may 5 times.", "You may five times."),
        ("Pi is 3.14. Yes.", "Pi is three point one four. Yes."),
        ("It is 3 and/or 4.", "It is three and or four."),
        ("The end.Next time", "The end. Next time"),
        ("Use e.g. salt.", "Use for example salt."),
        ("Meet at 5 pm est. or later", "Meet at five p m E S T or later"),
        ("It was 5 pm Eastern.", "It was five p m Eastern."),
    ],
)
def test_look_alikes_keep_their_reading(text: str, expected: str) -> None:
    assert normalize(text) == expected
