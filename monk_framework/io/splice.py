"""The UCI splice-junction DNA sequences, bundled with the package.

Source: UCI Machine Learning Repository, "Molecular Biology (Splice-junction Gene
Sequences)", data set no. 69 (Dua & Graff 2019; donors G. Towell, M. Noordewier and
J. Shavlik), licence CC BY 4.0. The file ``bundled/splice.data`` is the original, byte
for byte (``bundled/SPLICE_SOURCE.md`` has its provenance and verified facts); it is
checked against its sha256 every time it is read.

Each line is ``class, instance name, 60-letter sequence``. Sequences are over
{A, C, G, T} except 15 that hold IUPAC ambiguity codes (N, D, R, S). Policy: they are
dropped by default (``drop_ambiguous=True``); with ``drop_ambiguous=False`` they are
kept and the codes are letters like any other (the string kernel then treats them as
rare letters, exactly).
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from importlib import resources

from monk_framework.core.errors import DataFileError, ParameterError

__all__ = ["load_splice", "SPLICE_CLASSES", "SPLICE_SHA256", "SPLICE_COUNTS"]

SPLICE_SHA256 = "ebbae10c85d3c285e2a2489a37e42bc2ee8d91d15005e391a9962fa3389a114f"
SPLICE_CLASSES = ("EI", "IE", "N")
#: sequences per class in the file, and with the 15 ambiguous ones dropped
SPLICE_COUNTS = {
    "all": {"EI": 767, "IE": 768, "N": 1655},
    "unambiguous": {"EI": 762, "IE": 765, "N": 1648},
}
_BASES = frozenset("ACGT")


@lru_cache(maxsize=1)
def _records() -> tuple[tuple[str, str, str], ...]:
    path = resources.files("monk_framework") / "bundled" / "splice.data"
    raw = path.read_bytes()
    digest = hashlib.sha256(raw).hexdigest()
    if digest != SPLICE_SHA256:
        raise DataFileError(str(path), f"has sha256 {digest}, not the bundled UCI file's {SPLICE_SHA256}; reinstall monk-framework.")
    records = []
    for lineno, line in enumerate(raw.decode("ascii").splitlines(), start=1):
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != 3 or fields[0] not in SPLICE_CLASSES or not fields[2]:
            raise DataFileError(str(path), f"is not in the UCI splice format: {line[:40]!r}.", line=lineno)
        records.append((fields[0], fields[1], fields[2]))
    return tuple(records)


def load_splice(classes: tuple[str, ...] = ("EI", "IE"), *, drop_ambiguous: bool = True) -> dict[str, list[str]]:
    """The sequences of each requested class, in file order.

    ``classes`` are among "EI" (exon/intron, donor), "IE" (intron/exon, acceptor) and
    "N" (neither). With ``drop_ambiguous`` (the default) the 15 sequences holding an
    ambiguity code are left out: EI 762, IE 765, N 1648 sequences; otherwise EI 767,
    IE 768, N 1655.
    """
    unknown = [c for c in classes if c not in SPLICE_CLASSES]
    if unknown:
        raise ParameterError(f"Unknown splice class {unknown[0]!r}; the classes are {', '.join(SPLICE_CLASSES)}.")
    out: dict[str, list[str]] = {c: [] for c in classes}
    for cls, _, seq in _records():
        if cls in out and not (drop_ambiguous and not set(seq) <= _BASES):
            out[cls].append(seq)
    return out
