"""What makes a compressed file reproducible: architecture, model config, training policy, seed
and numeric-contract version, plus the frozen preset cards that name common recipes.

A recipe travels in every file header, either as a preset id (one byte) or spelled out as
canonical JSON. A preset card's meaning never changes once released.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields, replace
from functools import lru_cache
from importlib import resources

from rwkvzip.cm.context import KIND_CODES
from rwkvzip.cm.fastcm import CountsConfig
from rwkvzip.cm.mixing import OPTIONAL_FIELDS, MixConfig
from rwkvzip.net.gdn.model import GdnConfig, GdnModel
from rwkvzip.net.rwkv7.model import Rwkv7Config, Rwkv7Model

# Version of the arithmetic that turns a recipe and input into probabilities. Any change to
# a kernel that alters a single bit of a probability needs a new contract version.
NUMERIC_CONTRACT = 3
SUPPORTED_CONTRACTS = frozenset({3})
# Contracts 1 and 2 and preset cards 1 ... 72 were those of the development versions (0.x)
# before the format froze at 1.0; this version names them when it refuses their files.
RETIRED_CONTRACTS = frozenset({1, 2})
RETIRED_CARDS = range(1, 73)
RETIRED_BY = "rwkvzip 0.x, a development version before 1.0 (decode it with rwkvzip 0.1.0)"

# Smallest probability of any byte (the rest is scaled by 1 - 256 * floor).
PROB_FLOOR = 2.0**-20

ARCHS = {"rwkv7": (Rwkv7Config, Rwkv7Model), "gdn": (GdnConfig, GdnModel)}
OPTIMIZERS = ("sgd", "adam")
MAX_SEED = 2**64 - 1
# Train-scope groups, in canonical order (see TensorSpec.group): embedding, all norms,
# attention/time-mix, FFN/channel-mix, LM head with the final norm, output bias.
SCOPE_GROUPS = ("embed", "norm", "attn", "ffn", "head", "bias")
FULL_SCOPE = "+".join(SCOPE_GROUPS)
MAX_BPTT = 1024


def canonical_scope(scope: str) -> str:
    """'head+attn' -> 'attn+head'; refuses unknown or repeated groups."""
    parts = [p for p in scope.split("+") if p]
    if scope.strip() in ("all", "full"):
        return FULL_SCOPE
    bad = [p for p in parts if p not in SCOPE_GROUPS]
    if bad or not parts or len(set(parts)) != len(parts):
        raise RecipeError(f"bad train scope {scope!r} (groups: {', '.join(SCOPE_GROUPS)}, "
                          "joined with '+', or 'all')")
    return "+".join(g for g in SCOPE_GROUPS if g in parts)


class RecipeError(ValueError):
    """A recipe this version cannot run (bad values, unknown architecture or preset)."""


@dataclass(frozen=True)
class Recipe:
    arch: str = "rwkv7"
    model: Rwkv7Config | GdnConfig = field(default_factory=Rwkv7Config)
    optimizer: str = "adam"
    lr: float = 0.0005
    beta1: float = 0.0
    beta2: float = 0.999
    eps: float = 1e-8
    bptt: int = 0  # 0: output layer only; 1: exact one-step; T >= 2: truncated BPTT(T)
    ckpt: int = 16  # TBPTT checkpoint interval K: memory holds K steps, earlier ones replay
    scope: str = FULL_SCOPE  # parameter groups trained when bptt >= 1
    clip: float = 0.0  # per-element gradient clip (0: off)
    warmup: int = 0  # bytes of linear learning-rate warm-up
    decay: int = 0  # lr / sqrt(1 + bytes_seen / decay) (0: constant)
    lr_min: float = 0.0  # floor of the decayed learning rate
    seed: int = 0
    contract: int = NUMERIC_CONTRACT
    mix: MixConfig | None = None  # context mixing (None: the network alone)
    counts: CountsConfig | None = None  # count models linearly mixed, no network (cm/fastcm.py)
    prior: str = ""  # SHA-256 (hex) of the prior file the network starts from ("": seeded init)
    # TBPTT: after each update, recompute the live state over the segment with the new
    # weights (False: go on from the state the predicting forward passes left)
    recompute: bool = True
    # a frame of CRLF text is coded as LF text, its CRs put back by the decoder (coding/eol.py)
    eol: bool = False
    # a frame that does not compress (coding/bypass.py) is stored without the models seeing
    # it, a bit in its head saying so
    bypass: bool = False

    def validate(self) -> None:
        if self.arch not in ARCHS:
            raise RecipeError(f"unknown architecture {self.arch!r}")
        if self.contract in RETIRED_CONTRACTS:
            raise RecipeError(f"numeric contract {self.contract} was written by {RETIRED_BY}")
        if self.contract not in SUPPORTED_CONTRACTS:
            raise RecipeError(f"numeric contract {self.contract} needs a newer rwkvzip "
                              f"(this one runs contract {NUMERIC_CONTRACT})")
        if self.optimizer not in OPTIMIZERS:
            raise RecipeError(f"unknown optimizer {self.optimizer!r}")
        if not 0.0 <= self.lr <= 10.0:
            raise RecipeError(f"learning rate must be in [0, 10], got {self.lr}")
        if not (0.0 <= self.beta1 < 1.0 and 0.0 <= self.beta2 < 1.0):
            raise RecipeError("Adam betas must be in [0, 1)")
        if not 0.0 < self.eps <= 1.0:
            raise RecipeError(f"Adam eps must be in (0, 1], got {self.eps}")
        if not 0 <= self.seed <= MAX_SEED:
            raise RecipeError(f"seed must be in [0, 2**64), got {self.seed}")
        if not 0 <= self.bptt <= MAX_BPTT:
            raise RecipeError(f"bptt must be in [0, {MAX_BPTT}], got {self.bptt}")
        if not 1 <= self.ckpt <= MAX_BPTT:
            raise RecipeError(f"checkpoint interval must be in [1, {MAX_BPTT}], got {self.ckpt}")
        if canonical_scope(self.scope) != self.scope:
            raise RecipeError(f"train scope {self.scope!r} is not in canonical form")
        if not self.recompute and self.bptt < 2:  # one recipe per computation
            raise RecipeError("recompute can be off only with truncated BPTT (bptt >= 2)")
        if not (0.0 <= self.clip <= 1e30 and 0.0 <= self.lr_min <= 10.0):
            raise RecipeError("clip and lr_min must be non-negative")
        if not (0 <= self.warmup <= 2**40 and 0 <= self.decay <= 2**40):
            raise RecipeError("warmup and decay must be byte counts >= 0")
        if self.prior and not (len(self.prior) == 64
                               and all(c in "0123456789abcdef" for c in self.prior)):
            raise RecipeError("prior must be a SHA-256 digest in lowercase hex")
        if self.prior and (self.counts is not None
                           or (self.mix is not None and not self.mix.network)):
            raise RecipeError("a recipe without a network takes no prior")
        if self.mix is not None and self.counts is not None:
            raise RecipeError("a recipe has either mix or counts, not both")
        if not isinstance(self.model, ARCHS[self.arch][0]):
            raise RecipeError(f"model config does not belong to architecture {self.arch!r}")
        try:
            self.model.validate()
            if self.mix is not None:
                self.mix.validate()
            if self.counts is not None:
                self.counts.validate()
        except ValueError as exc:
            raise RecipeError(str(exc)) from None

    def build_model(self) -> Rwkv7Model | GdnModel:
        return ARCHS[self.arch][1](self.model)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["model"] = self.model.to_dict()
        if self.mix is None:  # recipes from before mixing keep their exact encoding
            del d["mix"]
        else:
            d["mix"] = self.mix.to_dict()
        if self.counts is None:  # optional in the same way
            del d["counts"]
        else:
            d["counts"] = self.counts.to_dict()
        if not self.prior:  # and so is the prior
            del d["prior"]
        if self.recompute:  # and the recompute every recipe before it did
            del d["recompute"]
        if not self.eol:  # and the line ends every recipe before it kept
            del d["eol"]
        if not self.bypass:  # and the models every frame before it went through
            del d["bypass"]
        return d

    def to_json(self) -> bytes:
        """Canonical form: sorted keys, no spaces, so a recipe has exactly one encoding."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":")).encode()

    @classmethod
    def from_dict(cls, d: dict) -> Recipe:
        if not isinstance(d, dict):
            raise RecipeError("recipe must be a JSON object")
        for optional, absent in (("mix", None), ("counts", None), ("prior", ""),
                                 ("recompute", True), ("eol", False), ("bypass", False)):
            if optional not in d:  # the fields a complete recipe may omit
                d = {**d, optional: absent}
        _require_fields(d, cls, "recipe")
        arch = d["arch"]
        if not isinstance(arch, str) or arch not in ARCHS:
            raise RecipeError(f"unknown architecture {arch!r}")
        cfg_cls = ARCHS[arch][0]
        model = d["model"]
        if not isinstance(model, dict):
            raise RecipeError("recipe model must be a JSON object")
        _require_fields(model, cfg_cls, "model")
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in model.values()):
            raise RecipeError("model fields must be integers")
        kwargs = {k: v for k, v in d.items() if k not in ("model", "mix", "counts")}
        _check_types(kwargs)
        mix = None if d["mix"] is None else _mix_from_dict(d["mix"])
        counts = None if d["counts"] is None else _counts_from_dict(d["counts"])
        recipe = cls(**kwargs, model=cfg_cls(**model), mix=mix, counts=counts)
        recipe.validate()
        return recipe

    @classmethod
    def from_json(cls, raw: bytes) -> Recipe:
        try:
            d = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise RecipeError("recipe is not valid JSON") from None
        return cls.from_dict(d)


# the settings of a network's online learning (they do nothing when lr is 0)
_TRAINING_FIELDS = ("optimizer", "beta1", "beta2", "eps", "bptt", "ckpt", "scope", "clip",
                    "warmup", "decay", "lr_min", "recompute")
_FIELD_TYPES = {"arch": str, "optimizer": str, "lr": float, "beta1": float, "beta2": float,
                "eps": float, "bptt": int, "ckpt": int, "scope": str, "clip": float,
                "warmup": int, "decay": int, "lr_min": float, "seed": int, "contract": int,
                "prior": str, "recompute": bool, "eol": bool, "bypass": bool}


def _require_fields(d: dict, cls: type, what: str) -> None:
    """A stored recipe is complete: every field of cls present, no other (no defaults)."""
    known = {f.name for f in fields(cls)}
    if set(d) != known:
        odd = sorted(set(d) ^ known)[0]
        raise RecipeError(f"{what} field {odd!r} is {'unknown' if odd in d else 'missing'}")


def _mix_from_dict(d: dict) -> MixConfig:
    if isinstance(d, dict):  # fields added later may be absent: they are at their default
        d = {name: getattr(MixConfig, name) for name in OPTIONAL_FIELDS} | d
        if "orders" in d:
            d = {**d, "orders": kind_codes(d["orders"])}
    return _config_from_dict(d, MixConfig, "mix")


def kind_codes(names: object) -> list[int]:
    """The codes of a recipe's context kinds, given by name (context.KIND_CODES)."""
    if isinstance(names, list) and names and all(type(k) is int for k in names):
        raise RecipeError(f"mix orders given as integer codes were written by {RETIRED_BY}")
    if not (isinstance(names, list) and all(isinstance(k, str) for k in names)):
        raise RecipeError("mix orders must be a list of context kind names")
    unknown = [k for k in names if k not in KIND_CODES]
    if unknown:
        raise RecipeError(f"unknown context kind {unknown[0]!r} (kinds: "
                          f"{', '.join(KIND_CODES)})")
    return [KIND_CODES[k] for k in names]


def _counts_from_dict(d: dict) -> CountsConfig:
    return _config_from_dict(d, CountsConfig, "counts")


def _config_from_dict(d: dict, cls: type, what: str):
    """A MixConfig or CountsConfig from its JSON object: every field, each of its type."""
    if not isinstance(d, dict):
        raise RecipeError(f"recipe {what} must be a JSON object or null")
    _require_fields(d, cls, what)
    orders = d["orders"]
    if not (isinstance(orders, list) and all(type(k) is int for k in orders)):
        raise RecipeError(f"{what} orders must be a list of integers")
    for name, value in d.items():
        want = type(getattr(cls, name))
        if name != "orders" and not (type(value) is want or (want is float
                                                             and type(value) is int)):
            raise RecipeError(f"{what} field {name!r} has the wrong type")
    return cls(**{**d, "orders": tuple(orders)})


def _check_types(kwargs: dict) -> None:
    for name, value in kwargs.items():
        want = _FIELD_TYPES[name]
        ok = isinstance(value, want) and (want is bool or not isinstance(value, bool))
        if want is float and isinstance(value, int) and not isinstance(value, bool):
            ok = True
        if not ok:
            raise RecipeError(f"recipe field {name!r} has the wrong type")


@dataclass(frozen=True)
class PresetCard:
    id: int
    name: str
    description: str
    recipe: Recipe
    draft: bool = False  # not yet released: free to change, no golden vector (CONTRIBUTING)


@lru_cache(maxsize=1)
def preset_cards() -> dict[int, PresetCard]:
    """Every frozen card shipped in rwkvzip.models, by id."""
    cards = {}
    for entry in resources.files("rwkvzip.models").iterdir():
        if not entry.name.endswith(".json"):
            continue
        d = json.loads(entry.read_text())
        card = PresetCard(int(d["id"]), d["name"], d["description"],
                          Recipe.from_dict(d["recipe"]), bool(d.get("draft", False)))
        if card.id in cards:
            raise RuntimeError(f"preset id {card.id} is used twice")
        cards[card.id] = card
    return cards


def preset_by_name(name: str) -> PresetCard:
    for card in preset_cards().values():
        if card.name == name:
            return card
    raise RecipeError(f"unknown preset {name!r}")


DEFAULT_PRESET = "mix-v71"


def default_recipe() -> Recipe:
    return preset_by_name(DEFAULT_PRESET).recipe


# Compression levels -1 ... -9 (CLI and API): the one table from level to preset card.
# Five tiers (tuned on the corpus, see models/README.md): count models alone; the context
# models and mixers with a small shipped prior, frozen; with a larger one, frozen (-6, the
# default, as gzip's and xz's); with the largest prior, frozen, its matrices read from
# bfloat16 (-7, at about 60 % of the default's speed); and with that prior adapting online
# by TBPTT (-8, -9, at a third of -7's speed); the mixing levels code by path coding. The
# default level is the lowest one that names the default card, so "no level" and it are the
# same recipe. Every level codes CRLF text as LF text (the cards' eol, coding/eol.py).
# -4 ... -9 run draft cards (mix-v71 ... mix-v74: the 1.0 cards with the x86 model and
# little-endian words) until the next release freezes them.
LEVELS = {**{level: "fast-v2" for level in (1, 2, 3)}, 4: "mix-v74", 5: "mix-v74",
          6: "mix-v71", 7: "mix-v73", 8: "mix-v72", 9: "mix-v72"}
DEFAULT_LEVEL = min(level for level, name in LEVELS.items() if name == DEFAULT_PRESET)


def level_recipe(level: int) -> Recipe:
    """The recipe of compression level 1 ... 9."""
    if level not in LEVELS:
        raise RecipeError(f"compression level must be 1 ... 9, got {level}")
    return preset_by_name(LEVELS[level]).recipe


def preset_id_of(recipe: Recipe) -> int | None:
    """The card id whose recipe equals this one, so the header can name it in one byte."""
    for card in preset_cards().values():
        if card.recipe == recipe:
            return card.id
    return None


def parse_settings(text: str) -> dict:
    """'arch=gdn,mlp=384,lr=0.001' -> {'arch': 'gdn', 'mlp': 384, 'lr': 0.001} (for scripts)."""
    settings: dict = {}
    for item in filter(None, text.split(",")):
        key, sep, value = item.partition("=")
        if not sep:
            raise RecipeError(f"setting {item!r} is not of the form name=value")
        settings[key] = _number_or_text(value)
    return settings


def _number_or_text(text: str) -> int | float | str:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def with_overrides(base: Recipe, **overrides) -> Recipe:
    """A recipe with some policy fields and model fields replaced (None means keep).

    Changing the architecture starts from that architecture's default config; changing the
    architecture or size of a network that starts from a prior starts it from seeded
    weights instead (a prior has its own size). mix=True turns context mixing on (default
    settings unless it is on already), mix=False off."""
    mix = overrides.pop("mix", None)
    arch = overrides.get("arch") or base.arch
    if arch not in ARCHS:
        raise RecipeError(f"unknown architecture {arch!r}")
    model = base.model if arch == base.arch else ARCHS[arch][0]()
    model_fields = {f.name for f in fields(model)}
    unknown = [k for k, v in overrides.items() if v is not None and k not in model_fields
               and k not in _FIELD_TYPES]
    if unknown:
        raise RecipeError(f"{unknown[0]!r} is not a setting of a {arch} recipe")
    model_kw = {k: v for k, v in overrides.items() if k in model_fields and v is not None}
    top_kw = {k: v for k, v in overrides.items() if k not in model_fields and v is not None}
    if "scope" in top_kw:
        top_kw["scope"] = canonical_scope(top_kw["scope"])
    for name in [k for k in top_kw if _FIELD_TYPES.get(k) is bool]:
        if top_kw[name] not in (0, 1, "true", "false"):
            raise RecipeError(f"{name} must be 0 or 1 (or true or false)")
        top_kw[name] = top_kw[name] in (1, "true")
    recipe = replace(base, model=replace(model, **model_kw), **top_kw)
    if recipe.bptt < 2 and "recompute" not in top_kw:
        recipe = replace(recipe, recompute=True)  # a setting of truncated BPTT alone
    if base.prior and (recipe.arch, recipe.model) != (base.arch, base.model):
        recipe = replace(recipe, prior="")  # the prior has its own size: seeded weights
    if mix is not None and recipe.counts is None:
        recipe = replace(recipe, mix=(base.mix or MixConfig()) if mix else None)
    unused = _unused_setting(recipe, [*model_kw, *top_kw] + (["mix"] if mix is not None else []))
    if unused:
        raise RecipeError(f"{unused[0]!r} does not apply to this recipe: {unused[1]}")
    recipe.validate()
    return recipe


def _unused_setting(recipe: Recipe, names: list[str]) -> tuple[str, str] | None:
    """The first of `names` that would change the recipe's header but not what it computes
    (a network setting where no network runs, training settings of a network that does not
    learn, a seed where a prior gives the weights), and why; None if all apply."""
    network = recipe.counts is None and (recipe.mix is None or recipe.mix.network)
    adam_only = ("beta1", "beta2", "eps")
    for name in names:
        if name in ("contract", "eol"):  # settings of every recipe
            continue
        if recipe.counts is not None:
            return name, "its count models run no network and no mixer"
        if name == "mix":
            continue
        if not network:
            return name, "it runs no network"
        if name == "seed" and recipe.prior:
            return name, "its network starts from a prior, not from seeded weights"
        if name in _TRAINING_FIELDS and recipe.lr == 0.0:
            return name, "its network does not learn (lr 0; set lr too)"
        if name in adam_only and recipe.optimizer != "adam":
            return name, "it is an Adam setting and the optimizer is sgd"
        if name == "scope" and recipe.bptt == 0:
            return name, "with bptt 0 only the output layer learns"
        if name in ("ckpt", "recompute") and recipe.bptt < 2:
            return name, f"{name} is a setting of truncated BPTT (bptt >= 2)"
    return None
