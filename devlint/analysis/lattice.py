"""The device lattice (SPEC §4): where a value lives, what kind of value it is, and how
two paths join. Pure values: no file, no tree walk."""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, replace

import libcst as cst

from devlint.analysis.device_tables import MAY_MOVE_INPUTS, MOVES_INPUTS, MOVES_INPUTS_WHEN_MOVED


_HEAD = re.compile(r"[A-Za-z_]\w*")


@dataclass(frozen=True)
class Device:
    """`cpu`, `accel(symbol)` or `unknown`.

    `symbol` is the code naming an accelerator device (`device`, `x.device`, `"cuda"`);
    None for an accelerator known only to be one (two symbols joined).
    """

    kind: str  # "cpu" | "accel" | "unknown"
    symbol: str | None = None

    @property
    def is_cpu(self) -> bool:
        return self.kind == "cpu"

    @property
    def is_accel(self) -> bool:
        return self.kind == "accel"

    @property
    def known(self) -> bool:
        return self.kind != "unknown"

    def __str__(self) -> str:
        if self.is_cpu:
            return "CPU"
        if self.is_accel:
            return self.symbol or "an accelerator"
        return "unknown device"

    @property
    def head(self) -> str:
        """The name the symbol starts with: `x` of `x.device`, `device` of `device`."""
        match = _HEAD.match(self.symbol or "")
        return match.group(0) if match else ""

    def in_words(self) -> str:
        """For messages: the code naming the device in backticks, else what it is."""
        return f"`{self.symbol}`" if self.symbol else str(self)


CPU = Device("cpu")
UNKNOWN_DEVICE = Device("unknown")


def accel(symbol: str | None = None) -> Device:
    return Device("accel", symbol)


def join_devices(a: Device, b: Device) -> Device:
    """Where a value lives after two paths meet: equal, both accelerators, or unknown."""
    if a == b:
        return a
    if a.is_accel and b.is_accel:
        return accel(None)
    return UNKNOWN_DEVICE


def join_symbolic(a: Device, b: Device, symbol: str | None) -> Device:
    """Joining two *device values* (not tensors): `"cuda" if ok else "cpu"` is the binding,
    a symbolic accelerator, not an unknown."""
    if a == b:
        return a
    if a.known and b.known:
        return accel(symbol if a.kind != b.kind else None)
    return UNKNOWN_DEVICE


def disagree(a: Device, b: Device) -> bool:
    """CPU against an accelerator: fails the moment the accelerator is real."""
    return (a.is_cpu and b.is_accel) or (a.is_accel and b.is_cpu)


class Kind(str, enum.Enum):
    TENSOR = "tensor"
    MODULE = "module"
    DATALOADER = "dataloader"
    BATCH = "batch"  # an item of a DataLoader: a tensor or a collection of tensors
    DEVICE = "device"  # a torch.device object
    OTHER = "other"  # known not to be any of the above (numbers, strings, lists ...)
    UNKNOWN = "unknown"


class Source(str, enum.Enum):
    """How a value got its device."""

    FACTORY = "factory"  # torch.ones(...), with or without device=
    MOVE = "move"  # .to(d), .cuda(), .cpu()
    PARAMETER = "parameter"  # a module method's parameter used as a tensor
    LOADER = "loader"  # iterating a DataLoader
    CONSTRUCTION = "construction"  # nn.Linear(...), Net(), DataLoader(...)
    NUMPY = "numpy"  # torch.from_numpy
    LITERAL = "literal"  # a device string or torch.device(...)
    NONE = ""


@dataclass(frozen=True)
class AbstractValue:
    """What the analysis knows of one expression's value at one point of the program.

    `zero_dim`: True (0-dim), False (1-d or more), None (not known). `origin`: the node
    where the device was decided (a factory call, a `.to()`, a parameter), None when
    several paths decided it. `how`: that decision in words, for messages.
    """

    kind: Kind = Kind.UNKNOWN
    device: Device = UNKNOWN_DEVICE
    zero_dim: bool | None = None
    origin: cst.CSTNode | None = None
    source: Source = Source.NONE
    how: str = ""
    is_parameter: bool = False  # an nn.Parameter
    holds_params: bool = False  # a module with parameters or buffers
    stateless: bool = False  # a torch.nn module known to hold neither (ReLU, MSELoss)
    layer: str = ""  # the torch.nn class of a module built from one (`torch.nn.LSTM`)
    maybe_accel: bool = False  # on some path (not all) on an accelerator: enough for DEV202/DEV203
    holds_accel: bool = False  # a list (or other collection) that received an accelerator tensor
    # the values of a tuple's items, where it was built from a literal (`return out, (h, c)`)
    elements: tuple[AbstractValue, ...] | None = None
    instance_of: str = ""  # the file's own class the value was built from (`enc = Encoder()`)
    item: bool = False  # an item unpacked from an output of unknown shape (not unpacked again)
    # an element of a tensor walked by a loop, or a tensor indexed by numbers: maybe 0-dim
    # (as an index, legal on any device)
    element: bool = False
    # a list built empty here: the join of what was appended to it (NO_ITEMS: nothing yet)
    items: AbstractValue | None = None
    # a torchvision transform: "cpu" (it makes a tensor, `ToTensor()`), "keep" (the input's
    # device); DISTRIBUTION for a `torch.distributions` object, whose samples are where its
    # parameters are
    transform: str = ""
    # a dict built from a literal with string keys: the values of its tensors (not models) by
    # key (`return {"gt_positive": x[mask]}`, read as `result["gt_positive"]`)
    entries: tuple[tuple[str, AbstractValue], ...] | None = None
    # the items of a list built empty here: a tensor on the CPU and one on an accelerator
    # it got (across the iterations of a loop), each None until it got one
    mixed: tuple[AbstractValue | None, AbstractValue | None] | None = None

    @property
    def is_tensor(self) -> bool:
        return self.kind is Kind.TENSOR

    @property
    def is_module(self) -> bool:
        return self.kind is Kind.MODULE

    @property
    def tensor_like(self) -> bool:
        """Good enough for an operand of arithmetic: a tensor, a batch, or a moved thing."""
        return self.kind in (Kind.TENSOR, Kind.BATCH) or (self.kind is Kind.UNKNOWN and self.device.known)

    @property
    def may_be_accel(self) -> bool:
        """On an accelerator on every path, or on some."""
        return self.device.is_accel or self.maybe_accel

    @property
    def may_be_accel_tensor(self) -> bool:
        """A tensor (or a module's output) on an accelerator on every path, or on some."""
        if self.kind in (Kind.MODULE, Kind.OTHER, Kind.DEVICE, Kind.DATALOADER):
            return False
        return (self.tensor_like and self.device.is_accel) or self.maybe_accel

    def on(self, device: Device, origin: cst.CSTNode | None, source: Source, how: str) -> AbstractValue:
        layer = self.layer
        if layer == MOVES_INPUTS_WHEN_MOVED and not device.is_cpu:
            layer = MAY_MOVE_INPUTS  # the paths without the wrapper are moved too now
        return replace(self, device=device, origin=origin, source=source, how=how, maybe_accel=False, layer=layer)

    def join(self, other: AbstractValue) -> AbstractValue:
        if self == other:
            return self
        if self is NONE or other is NONE:
            # `target = None` on one path, a tensor on another: where it is a tensor, it is
            # that tensor (None takes part in no computation on any device)
            return other if self is NONE else self
        kind = self.kind if self.kind is other.kind else Kind.UNKNOWN
        if kind in (Kind.DEVICE, Kind.OTHER):
            device = join_symbolic(self.device, other.device, None)
        else:
            device = join_devices(self.device, other.device)
        same_origin = self.origin is other.origin and self.device == other.device
        # the CPU on one path and an accelerator on the other: "may be on the accelerator"
        maybe = not device.known and (self.may_be_accel or other.may_be_accel)
        return AbstractValue(
            kind=kind,
            device=device,
            zero_dim=self.zero_dim if self.zero_dim == other.zero_dim else None,
            origin=self.origin if same_origin else None,
            source=self.source if self.source is other.source else Source.NONE,
            how=self.how if same_origin else "",
            is_parameter=self.is_parameter and other.is_parameter,
            holds_params=self.holds_params and other.holds_params,
            stateless=self.stateless and other.stateless,
            layer=_join_layers(self, other),
            maybe_accel=maybe,
            holds_accel=self.holds_accel or other.holds_accel,
            elements=_join_elements(self.elements, other.elements),
            instance_of=self.instance_of if self.instance_of == other.instance_of else "",
            items=join_items(self.items, other.items),
            transform=self.transform if self.transform == other.transform else "",
            element=self.element and other.element,
            entries=_join_entries(self.entries, other.entries),
            mixed=_union_witnesses(self.mixed, other.mixed),
        )

    def join_guarded(self, other: AbstractValue) -> AbstractValue:
        """`self` from the branch an availability check guards (`if
        torch.cuda.is_available(): x = x.cuda()`), `other` from the branch without it.
        On the accelerator where there is one and on the CPU where there is none is what
        the device binding means (`x.to(device)`): the accelerator, not "may be". So it
        is where the other branch left the value unknown: on a machine with the
        accelerator, the guarded branch is the one that ran. And on a machine without
        it, where the other branch runs, what the code places on the accelerator is on the
        CPU: `if use_cuda: p = p.cpu()` leaves `p` on the CPU on both paths."""
        if other.device.is_accel:
            other = replace(other, device=CPU, maybe_accel=False)
        elif other.maybe_accel:  # (what may be on the accelerator is not, where there is none)
            other = replace(other, maybe_accel=False)
        moved = self.device.is_accel and (self.tensor_like or self.is_module)
        compatible = self.kind is other.kind or other.kind is Kind.UNKNOWN or (self.tensor_like and other.tensor_like)
        if moved and not other.device.is_accel and compatible:
            return self
        joined = self.join(other)
        if joined.mixed is not None:
            # a CPU item the other arm appended is not there where the accelerator is
            mine, theirs = _witnesses(self), _witnesses(other)
            kept = (mine[0], mine[1] or theirs[1])
            joined = replace(joined, mixed=kept if kept != (None, None) else None)
        if self.items is not None and other.items is not None and NO_ITEMS not in (self.items, other.items):
            # `if torch.cuda.is_available(): out.append(x.cuda()) else: out.append(x)`: the
            # list holds what the guarded arm appends where there is an accelerator
            joined = replace(joined, items=self.items.join_guarded(other.items))
        return joined

    def join_single(self, other: AbstractValue) -> AbstractValue:
        """`self` from the path a machine with one accelerator takes, `other` from the arm
        only a machine with several runs (`if torch.cuda.device_count() > 1:`). What that
        arm alone moves stays on the CPU where one accelerator is all there is: the model
        the multi-GPU branch wraps and moves is not moved on a one-GPU machine."""
        stays = self.device.is_cpu and not self.maybe_accel and (self.tensor_like or self.is_module)
        if stays and other.device.is_accel and (other.kind is self.kind or (self.tensor_like and other.tensor_like)):
            return self
        return self.join(other)


_MOVING = frozenset({MOVES_INPUTS, MAY_MOVE_INPUTS, MOVES_INPUTS_WHEN_MOVED})


def _join_layers(a: AbstractValue, b: AbstractValue) -> str:
    if a.layer == b.layer:
        return a.layer
    if a.layer not in _MOVING and b.layer not in _MOVING:
        return ""

    def bare_on_accel(value: AbstractValue) -> bool:  # on the accelerator on some path, inputs not moved
        if value.layer in _MOVING:
            return value.layer == MAY_MOVE_INPUTS
        return value.may_be_accel

    return MAY_MOVE_INPUTS if bare_on_accel(a) or bare_on_accel(b) else MOVES_INPUTS_WHEN_MOVED


def _join_elements(
    a: tuple[AbstractValue, ...] | None, b: tuple[AbstractValue, ...] | None
) -> tuple[AbstractValue, ...] | None:
    """Two tuples of one length join item by item; anything else has no items known."""
    if a is None or b is None or len(a) != len(b):
        return None
    return tuple(x.join(y) for x, y in zip(a, b))


def _join_entries(
    a: tuple[tuple[str, AbstractValue], ...] | None, b: tuple[tuple[str, AbstractValue], ...] | None
) -> tuple[tuple[str, AbstractValue], ...] | None:
    """Two dicts join key by key, over the keys both hold."""
    if a is None or b is None:
        return None
    theirs = dict(b)
    joined = tuple((key, value.join(theirs[key])) for key, value in a if key in theirs)
    return joined or None


def join_items(a: AbstractValue | None, b: AbstractValue | None, *, together: bool = True) -> AbstractValue | None:
    """What two paths' lists hold: a list still empty on one path holds what the other's
    does. `together`: the list may hold both at once (an append, the iterations of a loop),
    so it keeps a witness of each device (`mixed`); not where an item was replaced."""
    if a is None or b is None:
        return None
    if a is NO_ITEMS:
        return b
    if b is NO_ITEMS:
        return a
    joined = a.join(b)
    return replace(joined, mixed=_join_witnesses(a, b) if together else None)


def branch_witnesses(
    before: AbstractValue | None, body: AbstractValue | None, orelse: AbstractValue | None
) -> tuple[AbstractValue | None, AbstractValue | None] | None:
    """What a list surely got after an `if` only one arm of which runs: what it held
    before, and what both arms gave it (the items before, and of each arm)."""
    held = _witnesses(before) if before is not None and before is not NO_ITEMS else (None, None)
    first = _witnesses(body) if body is not None and body is not NO_ITEMS else (None, None)
    second = _witnesses(orelse) if orelse is not None and orelse is not NO_ITEMS else (None, None)
    for arm in (first, second):
        if None not in arm:
            return arm  # the run that takes this arm mixes the list by itself
    kept = (
        held[0] or (first[0] if first[0] is not None and second[0] is not None else None),
        held[1] or (first[1] if first[1] is not None and second[1] is not None else None),
    )
    return kept if kept != (None, None) else None


def _union_witnesses(
    a: tuple[AbstractValue | None, AbstractValue | None] | None,
    b: tuple[AbstractValue | None, AbstractValue | None] | None,
) -> tuple[AbstractValue | None, AbstractValue | None] | None:
    if a is None or b is None:
        return a or b
    return (a[0] or b[0], a[1] or b[1])


def _witnesses(value: AbstractValue) -> tuple[AbstractValue | None, AbstractValue | None]:
    """(a CPU tensor, an accelerator tensor) that `value`, an item of a list, stands for."""
    cpu, accel_item = value.mixed or (None, None)
    if value.tensor_like and value.device.is_cpu:
        cpu = cpu or value
    elif value.tensor_like and value.device.is_accel and not value.maybe_accel:
        accel_item = accel_item or value
    return cpu, accel_item


def _join_witnesses(a: AbstractValue, b: AbstractValue) -> tuple[AbstractValue | None, AbstractValue | None] | None:
    """What two paths' list items joined stand for: a list holds what any iteration of a
    loop appended, together (`mixed`)."""
    first, second = _witnesses(a), _witnesses(b)
    joined = (first[0] or second[0], first[1] or second[1])
    return joined if joined != (None, None) else None


DISTRIBUTION = "distribution"
ALBUMENTATIONS = "albumentations"  # an albumentations pipeline ending in `ToTensorV2()`
TENSOR_ITEMS = "tensor items"  # a torchvision dataset whose items are CPU tensors (`ds[i]`)
ROWS = "rows"  # `TensorDataset(x, y)` (or a split of it): `ds[i]` is a row of each, in `elements`

UNKNOWN = AbstractValue()
OTHER = AbstractValue(Kind.OTHER)
NONE = AbstractValue(Kind.OTHER, how="None")  # the literal: an attribute's placeholder until it is set
TRUE = AbstractValue(Kind.OTHER, how="True")  # the literals, as one call passes them (`to_numpy=True`)
FALSE = AbstractValue(Kind.OTHER, how="False")
# what one call passes that decides an `if` of the function called: `if device is not None:`, `if keep:`
CONSTANTS = {"None": NONE, "True": TRUE, "False": FALSE}


def is_constant(value: AbstractValue) -> bool:
    """Is `value` one of the `CONSTANTS` (the object itself: an `OTHER` equal to it is not)?"""
    return value is NONE or value is TRUE or value is FALSE


NO_ITEMS = AbstractValue(Kind.OTHER, how="no items")
HOST_ARRAY = AbstractValue(Kind.OTHER, how="a NumPy array")  # what NumPy gives: host data, never a tensor
EMPTY_LIST = AbstractValue(Kind.OTHER, items=NO_ITEMS)


@dataclass(frozen=True)
class Operand:
    expr: cst.BaseExpression
    value: AbstractValue


@dataclass(frozen=True)
class Conflict:
    """An operation whose operands live on different devices, as PyTorch decides it.

    `cpu` is the operand on the CPU and `other` the one on the accelerator. `kind` is
    "operands" (elementwise or not), "inplace" (the CPU side is the output of an
    in-place operation), "module" (a module called with a tensor; one side is the
    module), "index" (a CPU tensor indexed by an accelerator index or mask) or
    "passed" (a call of a function of the file hands in the CPU tensor, which meets the
    other operand at `inner`, in that function), or "joined" (`torch.stack(losses)` of a
    list that got a CPU tensor and an accelerator tensor; both operands are the list).
    """

    node: cst.CSTNode
    cpu: Operand
    other: Operand
    kind: str = "operands"
    inner: cst.CSTNode | None = None
