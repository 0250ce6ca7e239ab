"""Text normalisation shared by the index build and the queries.

`normalise("Sant Julià de Lòria")` -> `"sant julia de loria"`: case-folded, accents folded (NFKD
then combining marks dropped, plus the letters NFKD does not decompose: ø, æ, œ, ł, đ, ß, ...),
every run of non-alphanumeric characters turned into one space.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

_EXTRA = str.maketrans(
    {
        "ø": "o", "æ": "ae", "œ": "oe", "ł": "l", "đ": "d", "ð": "d", "þ": "th", "ı": "i",
        "ß": "ss", "ŀ": "l", "ħ": "h", "ŧ": "t", "ƒ": "f", "’": "'", "ʼ": "'",
    }
)
# Runs of anything but letters and digits break words; the vowel signs of the Indic scripts (U+0900-U+0DFF:
# Devanagari ... Sinhala, spacing marks that are not alphanumeric) stay inside their word.
_NON_WORD = re.compile(r"(?:[^\w\u0900-\u0DFF]|_|[\u0964\u0965])+", re.UNICODE)


@lru_cache(maxsize=65536)
def normalise(text: str) -> str:
    """Case- and accent-folded text with single spaces between words."""
    if not text:
        return ""
    s = unicodedata.normalize("NFKD", text.casefold())
    s = "".join(ch for ch in s if not unicodedata.combining(ch))
    s = s.translate(_EXTRA)
    return _NON_WORD.sub(" ", s).strip()


def tokens(text: str) -> list[str]:
    """The normalised words of `text`."""
    n = normalise(text)
    return n.split() if n else []


def max_typos(token: str) -> int:
    """Edit distance tolerated for a query token: 0 up to 3 letters, 1 up to 7, then 2."""
    n = len(token)
    if n <= 3:
        return 0
    if n <= 7:
        return 1
    return 2
