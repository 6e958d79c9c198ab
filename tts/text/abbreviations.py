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
    "°C": ("degree Celsius", "degrees Celsius"),
    "°F": ("degree Fahrenheit", "degrees Fahrenheit"),
    "°": ("degree", "degrees"),
}

# Money: symbol -> (major singular, major plural, minor singular, minor plural).
CURRENCIES: dict[str, tuple[str, str, str, str]] = {
    "$": ("dollar", "dollars", "cent", "cents"),
    "£": ("pound", "pounds", "penny", "pence"),
    "€": ("euro", "euros", "cent", "cents"),
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
