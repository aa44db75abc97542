"""The form fields of ``POST /datasets`` besides the files, declared once.

Everything that spells an upload option comes from :data:`UPLOAD_OPTIONS`: the route's form
parameters (so the OpenAPI document), ``ParseOptions``' defaults, bounds and descriptions, the
parser's check that an option applies to the file's format (``formats.check_options``), the
Python client's keyword arguments and the ``labelserve datasets upload`` options. Adding an
option here (and its use in a parser) is the whole change.

Plain Python on purpose: the command line imports it to build its options, and importing
pydantic or NumPy there would cost more than the whole start-up budget of a ``--help``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

# the formats a parser reads; "auto" chooses one of them
FORMATS = ("arff", "csv", "libsvm", "mat")
FormatName = Literal["auto", "arff", "csv", "libsvm", "mat"]


@dataclass(frozen=True)
class UploadOption:
    """One form field of an upload: how it is typed, bounded, described, and where it applies.

    ``kind`` is the value's type in a form and on a command line (``int`` or ``str``);
    ``listed`` options hold several names, sent as one comma-separated string (or a JSON
    array). ``formats`` are the formats whose parser reads the option; giving it (a value other
    than ``default``) for a file read as another format is a contradiction, not silently
    ignored. ``parse`` is False for an option of the dataset rather than of its parser.
    """

    name: str
    kind: type[int] | type[str]
    description: str
    default: str | None = None
    choices: tuple[str, ...] = ()
    formats: tuple[str, ...] = FORMATS
    minimum: int | None = None
    max_length: int | None = None
    pattern: str | None = None
    listed: bool = False
    parse: bool = True

    @property
    def everywhere(self) -> bool:
        """Whether every format reads this option (nothing to check against the format)."""
        return self.formats == FORMATS

    def given(self, value: object) -> bool:
        """Whether ``value`` is a choice of the user's: the default (what a form sends unasked),
        ``None`` and an empty list are not."""
        return value is not None and value != self.default and value != []


# What a dataset name (an upload's, a split part's) may not hold: control characters (a NUL
# cannot be stored by PostgreSQL) and the bidirectional controls that make a name display other
# than it reads (U+200E/F, U+202A-E, U+2066-9). One pattern for the OpenAPI document and the checks.
_FORBIDDEN_IN_NAMES = r"\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069"
DATASET_NAME_PATTERN = rf"^[^{_FORBIDDEN_IN_NAMES}]*$"
_FORBIDDEN_IN_NAMES_RE = re.compile(rf"[{_FORBIDDEN_IN_NAMES}]")
DATASET_NAME_MAX_LENGTH = 255


def name_fault(name: str) -> str | None:
    """What is wrong with a dataset, feature or label name's characters, or None."""
    found = _FORBIDDEN_IN_NAMES_RE.search(name)
    if found is None:
        return None
    kind = "a direction control" if found.group() >= "\u200e" else "a control"
    return f"contains {kind} character (U+{ord(found.group()):04X} at position {found.start() + 1})"


UPLOAD_OPTIONS: tuple[UploadOption, ...] = (
    UploadOption(
        "name",
        str,
        "default: the file name; no control or direction control characters",
        max_length=DATASET_NAME_MAX_LENGTH,
        pattern=DATASET_NAME_PATTERN,
        parse=False,
    ),
    UploadOption("format", str, "auto: from the file name's extension", default="auto", choices=("auto", *FORMATS)),
    UploadOption(
        "label_count",
        int,
        "ARFF without labels_file or MEKA header, CSV: how many columns are labels",
        formats=("arff", "csv", "libsvm"),
        minimum=1,
    ),
    UploadOption(
        "label_location",
        str,
        "ARFF with label_count: labels are the last or the first attributes",
        default="end",
        choices=("end", "start"),
        formats=("arff", "csv"),
    ),
    UploadOption(
        "label_columns",
        str,
        "CSV: the label columns, comma-separated names or a JSON array (or label_count)",
        formats=("arff", "csv"),
        listed=True,
    ),
    UploadOption(
        "n_features",
        int,
        "LIBSVM: number of features (default: the largest index seen)",
        formats=("libsvm",),
        minimum=1,
    ),
    UploadOption(
        "part",
        str,
        "MAT train/test layout: which part to store",
        default="train",
        choices=("train", "test"),
        formats=("mat",),
    ),
)

OPTIONS_BY_NAME: Mapping[str, UploadOption] = {option.name: option for option in UPLOAD_OPTIONS}
PARSE_OPTIONS: tuple[UploadOption, ...] = tuple(option for option in UPLOAD_OPTIONS if option.parse)


def form_values(options: Mapping[str, object]) -> dict[str, str]:
    """The multipart form fields for keyword ``options`` of an upload (``None`` ones are left out,
    so the server's defaults apply); a list of names becomes one comma-separated string.

    Raises ``TypeError`` for a name that is no upload option, listing the ones there are.
    """
    unknown = sorted(set(options) - set(OPTIONS_BY_NAME))
    if unknown:
        raise TypeError(f"unknown upload option(s) {', '.join(unknown)}; the options are {', '.join(OPTIONS_BY_NAME)}")
    values = {}
    for key, value in options.items():
        if value is None:
            continue
        if OPTIONS_BY_NAME[key].listed and isinstance(value, Iterable) and not isinstance(value, str):
            value = ",".join(str(item) for item in value)
        values[key] = str(value)
    return values
