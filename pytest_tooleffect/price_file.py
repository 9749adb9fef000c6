"""The ``--tooleffect-prices`` file: each model's price per million input and output tokens, in USD.

A file of the run's configuration, read once by :func:`pytest_tooleffect.settings.resolve`; what a
decision costs is worked out from it in :mod:`pytest_tooleffect.decide.pricing`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import pytest
import yaml
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, TypeAdapter, ValidationError

from pytest_tooleffect.formats import Price
from pytest_tooleffect.options import OPT_PRICES
from pytest_tooleffect.oracle.rules import UniqueKeyLoader
from pytest_tooleffect.util.bounds import MAX_PRICE_PER_MTOK
from pytest_tooleffect.util.input_files import open_input

__all__ = ["MAX_PRICES_BYTES", "MAX_PRICE_PER_MTOK", "USDPerMTok", "load_prices"]

#: the most bytes a prices file may hold (1 MiB: about 15,000 models, far more than a run uses).
#: Reading YAML takes about 2.7 s per MiB on the 2-core test machine, and a 36 MB file took 53 s
#: and 2 GB before the first test: a larger file is refused before it is parsed
MAX_PRICES_BYTES = 1 << 20

_PRICES_SHAPE = "{model: {input_per_mtok: USD, output_per_mtok: USD}}"


def _number(value: Any) -> Any:
    """A price as YAML gives it: ``true``/``false`` is no number; ``1e3`` (text to YAML 1.1) is one."""
    if isinstance(value, bool):
        raise ValueError(f"a number of USD, got {str(value).lower()}")
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise ValueError(f"a number of USD, got the text {value!r}") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{value}, not a finite number")
    return value


#: one price: a finite number of USD per million tokens from 0 to :data:`MAX_PRICE_PER_MTOK`
USDPerMTok = Annotated[float, BeforeValidator(_number), Field(ge=0, le=MAX_PRICE_PER_MTOK, allow_inf_nan=False)]


class _PriceEntry(BaseModel):
    """One model's entry of the ``--tooleffect-prices`` file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input_per_mtok: USDPerMTok
    output_per_mtok: USDPerMTok


def _price_problem(exc: ValidationError, raw: Mapping[Any, Any]) -> str:
    """The first problem of a prices file, in words: the model, the field, what it holds and what a
    price is.
    """
    err = exc.errors()[0]
    loc = err["loc"]
    model = f"model {loc[0]!r}" if loc else "the file"
    if len(loc) < 2:
        got = raw.get(loc[0]) if loc else raw
        return f"{model}: a mapping {{input_per_mtok: USD, output_per_mtok: USD}}, got {_kind(got)}"
    field = loc[1]
    if err["type"] == "missing":
        return f"{model}: {field} is missing (a price per million input and per million output tokens, in USD)"
    if err["type"] == "extra_forbidden":
        return f"{model}: {field!r} is not a price field (input_per_mtok, output_per_mtok)"
    got = err.get("input")
    shown = got if isinstance(got, str) else repr(got)
    why = {"less_than_equal": f"{shown}, more than {MAX_PRICE_PER_MTOK:,.0f}",
           "greater_than_equal": f"{shown}, below 0", "finite_number": f"{shown}, not a finite number",
           "value_error": str(err.get("ctx", {}).get("error", ""))}.get(err["type"], f"a number of USD, got {shown}")
    return (f"{model}: {field}: {why}; a price is a finite number of USD per million tokens from 0 to "
            f"{MAX_PRICE_PER_MTOK:,.0f}")


def _bounded_text(path: Path) -> str:
    """The prices file's text (UTF-8, line ends made LF), read no further than :data:`MAX_PRICES_BYTES`.

    Raises:
        pytest.UsageError: it holds more (names the file, its size when known, and the bound).
        OSError: it cannot be opened or read (not a file to read, missing).
        UnicodeDecodeError: it is not UTF-8.
    """
    import os
    import stat

    with open_input(path) as fh:
        data = fh.read(MAX_PRICES_BYTES + 1)
        if len(data) > MAX_PRICES_BYTES:
            st = os.fstat(fh.fileno())
            size = f"{st.st_size / 1e6:,.1f} MB, " if stat.S_ISREG(st.st_mode) else ""  # a pipe's is not known
            raise pytest.UsageError(f"{OPT_PRICES} {path}: {size}more than the {MAX_PRICES_BYTES // (1 << 20)} MiB a "
                                    "prices file may hold (about 15,000 models); list only the models the run uses, "
                                    "litellm prices the others")
    text = data.decode("utf-8")
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


def _kind(value: Any) -> str:
    return "nothing" if value is None else f"a {'list' if isinstance(value, list) else type(value).__name__}"


def load_prices(path: Path | None) -> dict[str, Price]:
    """The ``--tooleffect-prices`` file: model → :class:`Price`.

    Raises:
        pytest.UsageError: the file cannot be read, holds more than :data:`MAX_PRICES_BYTES`, is not
            YAML or JSON (UTF-8), is not a mapping of models,
            or a price is not a number from 0 to :data:`MAX_PRICE_PER_MTOK` (one line naming the file,
            the model and the field).
    """
    if path is None:
        return {}
    try:
        raw = yaml.load(_bounded_text(path), Loader=UniqueKeyLoader)
    except OSError as exc:
        raise pytest.UsageError(f"{OPT_PRICES} {path}: {exc.strerror or exc}") from exc
    except (yaml.YAMLError, UnicodeDecodeError, ValueError) as exc:
        why = " ".join(str(exc).split())  # YAML's message spans lines
        raise pytest.UsageError(f"{OPT_PRICES} {path}: not YAML or JSON ({why}); expected {_PRICES_SHAPE}") from exc
    raw = {} if raw is None else raw
    if not isinstance(raw, dict):
        raise pytest.UsageError(f"{OPT_PRICES} {path}: the file is a mapping {_PRICES_SHAPE}, got {_kind(raw)}")
    raw = {str(k): v for k, v in raw.items()}
    try:
        entries = _PRICES.validate_python(raw)
    except ValidationError as exc:
        raise pytest.UsageError(f"{OPT_PRICES} {path}: {_price_problem(exc, raw)}") from None
    return {m: Price(e.input_per_mtok, e.output_per_mtok) for m, e in entries.items()}


_PRICES = TypeAdapter(dict[str, _PriceEntry])
