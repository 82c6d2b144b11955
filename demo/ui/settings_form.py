"""A page's values as the core's settings: each value becomes what its field's type wants, read
from the settings dataclass as the command line reads its options, so no tab re-types a field.
"""

import typing

from ..app.limits import whole

UNSET = (None, "", "default")  # what an optional setting's widget shows when it is left to the core


def settings_of(cls, values: dict, **fixed):
    """``cls`` from widget (or API) values by field name: a whole-number field's value made whole
    (a slider's 3.0 is 3), an optional field's ``UNSET`` value None (the core's default); then
    ``fixed``. The dataclass itself checks the rest and says in words what is wrong."""
    hints = typing.get_type_hints(cls)
    return cls(**{name: _as_field(hints[name], value) for name, value in values.items()}, **fixed)


def _as_field(hint, value):
    kinds = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, _UNION) else (hint,)
    if type(None) in kinds and value in UNSET:
        return None
    return whole(value) if int in kinds else value


_UNION = type(int | None)  # the X | Y annotations' origin (typing.Union is Optional's)
