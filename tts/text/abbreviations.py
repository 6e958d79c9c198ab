"""Word tables for the normaliser: abbreviations, units and month names.

Kept apart from the regex passes so that adding an entry never means touching a pattern.
"""

from __future__ import annotations

# Titles written before a name.  Their period never ends a sentence ("Dr. Smith").
# "Dr." and "St." are ambiguous (doctor/drive, saint/street); the normaliser picks the street
# reading only when the abbreviation follows a capitalised word and no name follows it.
TITLES: dict[str, str] = {
    "Mr": "mister",
    "Mrs": "missus",
    "Ms": "miz",
    "Dr": "doctor",
    "St": "saint",
    "Prof": "professor",
    "Mt": "mount",
    "Capt": "captain",
    "Sgt": "sergeant",
    "Lt": "lieutenant",
    "Gov": "governor",
    "Sen": "senator",
    "Rep": "representative",
    "Rev": "reverend",
}
STREET_READINGS: dict[str, str] = {"Dr": "drive", "St": "street"}

# Abbreviations that may end a sentence ("... and so on, etc.").  When one is followed by the
# end of the text or by a capitalised word, its period is kept as a sentence-end pause.
SENTENCE_ABBREVIATIONS: dict[str, str] = {
    "etc": "et cetera",
    "Jr": "junior",
    "Sr": "senior",
    "Inc": "incorporated",
    "Ltd": "limited",
    "Co": "company",
    "Corp": "corporation",
    "Ave": "avenue",
    "Rd": "road",
    "Blvd": "boulevard",
    "approx": "approximately",
    "Dept": "department",
    "dept": "department",
    "Fig": "figure",
    "fig": "figure",
    "Jan": "January",
    "Feb": "February",
    "Mar": "March",
    "Apr": "April",
    "Jun": "June",
    "Jul": "July",
    "Aug": "August",
    "Sep": "September",
    "Sept": "September",
    "Oct": "October",
    "Nov": "November",
    "Dec": "December",
}

# Latin abbreviations that are always followed by more of the sentence.
LATIN: dict[str, str] = {
    "e.g.": "for example",
    "i.e.": "that is",
    "cf.": "compare",
    "vs.": "versus",
    "vs": "versus",
    "viz.": "namely",
}

MONTHS: tuple[str, ...] = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)
# Every written form of a month (compared lower-case) -> its number; "sept" is the one 4-letter form.
MONTH_FORMS: dict[str, int] = {
    **{m.lower(): i for i, m in enumerate(MONTHS, start=1)},
    **{m[:3].lower(): i for i, m in enumerate(MONTHS, start=1)},
    "sept": 9,
}

# Street types read in full after a house number and a street name ("42 Elm St." -> "Elm Street").
STREET_TYPES: dict[str, str] = {
    "st": "Street", "street": "Street", "ave": "Avenue", "av": "Avenue", "avenue": "Avenue",
    "rd": "Road", "road": "Road", "dr": "Drive", "drive": "Drive", "blvd": "Boulevard",
    "ct": "Court", "ln": "Lane", "expy": "Expressway", "hwy": "Highway", "pkwy": "Parkway",
    "pl": "Place", "sq": "Square", "ter": "Terrace", "cir": "Circle", "way": "Way", "trl": "Trail",
}
DIRECTIONS: dict[str, str] = {
    "N": "North", "S": "South", "E": "East", "W": "West",
    "NE": "Northeast", "NW": "Northwest", "SE": "Southeast", "SW": "Southwest",
}
# Unit designators before a number in an address ("Apt. 7B" -> "apartment seven B").
UNIT_DESIGNATORS: dict[str, str] = {
    "Apt": "apartment", "Ste": "suite", "Bldg": "building", "Rm": "room", "Fl": "floor",
}
US_STATES: dict[str, str] = {
    "AL": "Alabama", "AK": "Alaska", "AZ": "Arizona", "AR": "Arkansas", "CA": "California",
    "CO": "Colorado", "CT": "Connecticut", "DE": "Delaware", "FL": "Florida", "GA": "Georgia",
    "HI": "Hawaii", "ID": "Idaho", "IL": "Illinois", "IN": "Indiana", "IA": "Iowa", "KS": "Kansas",
    "KY": "Kentucky", "LA": "Louisiana", "ME": "Maine", "MD": "Maryland", "MA": "Massachusetts",
    "MI": "Michigan", "MN": "Minnesota", "MS": "Mississippi", "MO": "Missouri", "MT": "Montana",
    "NE": "Nebraska", "NV": "Nevada", "NH": "New Hampshire", "NJ": "New Jersey", "NM": "New Mexico",
    "NY": "New York", "NC": "North Carolina", "ND": "North Dakota", "OH": "Ohio", "OK": "Oklahoma",
    "OR": "Oregon", "PA": "Pennsylvania", "RI": "Rhode Island", "SC": "South Carolina",
    "SD": "South Dakota", "TN": "Tennessee", "TX": "Texas", "UT": "Utah", "VT": "Vermont",
    "VA": "Virginia", "WA": "Washington", "WV": "West Virginia", "WI": "Wisconsin", "WY": "Wyoming",
    "DC": "D C",
}
# State codes that are also English words: read as a state only when a ZIP code follows.
STATE_WORDS = frozenset({"HI", "ID", "IN", "ME", "OH", "OK", "OR", "LA", "MA", "PA", "DE", "CO", "AL"})

# Units read only directly after a number: (singular, plural).  Case matters ("m" metre vs "M").
UNITS: dict[str, tuple[str, str]] = {
    "km/h": ("kilometer per hour", "kilometers per hour"),
    "kph": ("kilometer per hour", "kilometers per hour"),
    "mph": ("mile per hour", "miles per hour"),
    "km": ("kilometer", "kilometers"),
    "cm": ("centimeter", "centimeters"),
    "mm": ("millimeter", "millimeters"),
    "m": ("meter", "meters"),
    "mi": ("mile", "miles"),
    "ft": ("foot", "feet"),
    "kg": ("kilogram", "kilograms"),
    "mg": ("milligram", "milligrams"),
    "g": ("gram", "grams"),
    "lb": ("pound", "pounds"),
    "lbs": ("pound", "pounds"),
    "oz": ("ounce", "ounces"),
    "ml": ("milliliter", "milliliters"),
    "mL": ("milliliter", "milliliters"),
    "L": ("liter", "liters"),
    "ms": ("millisecond", "milliseconds"),
    "sec": ("second", "seconds"),
    "min": ("minute", "minutes"),
    "hr": ("hour", "hours"),
    "hrs": ("hour", "hours"),
    "h": ("hour", "hours"),
    "Hz": ("hertz", "hertz"),
    "kHz": ("kilohertz", "kilohertz"),
    "MHz": ("megahertz", "megahertz"),
    "GHz": ("gigahertz", "gigahertz"),
    "KB": ("kilobyte", "kilobytes"),
    "kB": ("kilobyte", "kilobytes"),
    "MB": ("megabyte", "megabytes"),
    "GB": ("gigabyte", "gigabytes"),
    "TB": ("terabyte", "terabytes"),
    "kW": ("kilowatt", "kilowatts"),
    "kWh": ("kilowatt hour", "kilowatt hours"),
    "KG": ("kilogram", "kilograms"),
    "Kg": ("kilogram", "kilograms"),
    "KM": ("kilometer", "kilometers"),
    "m/s": ("meter per second", "meters per second"),
    "km/s": ("kilometer per second", "kilometers per second"),
    "ft/s": ("foot per second", "feet per second"),
    "kbps": ("kilobit per second", "kilobits per second"),
    "mbps": ("megabit per second", "megabits per second"),
    "Mbps": ("megabit per second", "megabits per second"),
    "gbps": ("gigabit per second", "gigabits per second"),
    "Gbps": ("gigabit per second", "gigabits per second"),
    "m2": ("square meter", "square meters"),
    "km2": ("square kilometer", "square kilometers"),
    "cm2": ("square centimeter", "square centimeters"),
    "ft2": ("square foot", "square feet"),
    "sq ft": ("square foot", "square feet"),
    "m3": ("cubic meter", "cubic meters"),
    "km3": ("cubic kilometer", "cubic kilometers"),
    "cm3": ("cubic centimeter", "cubic centimeters"),
    "yd": ("yard", "yards"),
    "°C": ("degree Celsius", "degrees Celsius"),
    "°F": ("degree Fahrenheit", "degrees Fahrenheit"),
    "°": ("degree", "degrees"),
}

# Money: symbol -> (major singular, major plural, minor singular, minor plural).
CURRENCIES: dict[str, tuple[str, str, str, str]] = {
    "$": ("dollar", "dollars", "cent", "cents"),
    "£": ("pound", "pounds", "penny", "pence"),
    "€": ("euro", "euros", "cent", "cents"),
    "¥": ("yen", "yen", "sen", "sen"),
    "₩": ("won", "won", "jeon", "jeon"),
    "₹": ("rupee", "rupees", "paisa", "paise"),
}
# "US$5" -> "five US dollars": a country prefix on the dollar sign.
DOLLAR_PREFIXES: dict[str, str] = {"US": "US", "A": "Australian", "AU": "Australian", "C": "Canadian",
                                   "CA": "Canadian", "NZ": "New Zealand", "HK": "Hong Kong", "S": "Singapore"}
# Denominators of a rate after money or a measure ("$20/mo", "5 L/day"): the singular word.
PER_UNITS: dict[str, str] = {
    "s": "second", "sec": "second", "min": "minute", "h": "hour", "hr": "hour", "hour": "hour",
    "d": "day", "day": "day", "wk": "week", "week": "week", "mo": "month", "month": "month",
    "yr": "year", "year": "year", "person": "person", "head": "head", "night": "night",
}
MONEY_SCALES: dict[str, str] = {
    "thousand": "thousand", "k": "thousand", "K": "thousand",
    "million": "million", "m": "million", "M": "million", "mn": "million",
    "billion": "billion", "bn": "billion", "b": "billion", "B": "billion",
    "trillion": "trillion", "tn": "trillion", "T": "trillion",
}

# Symbols read as words wherever they stand.
SYMBOL_WORDS: dict[str, str] = {
    "&": "and",
    "@": "at",
    "+": "plus",
    "=": "equals",
    "%": "percent",
    "°": "degrees",
}
