"""Torch call semantics for the interpreter: factories, layers and models, moves, tensor
methods, `torch.*` operations, module calls, and the device rules that decide a conflict.

`TorchCalls` is the half of `ScopeEvaluator` that knows torch; the other half
(`interpreter.py`) knows Python statements and expressions.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import libcst as cst

from devlint.analysis import device_tables as T
from devlint.analysis.lattice import (
    ALBUMENTATIONS,
    CPU,
    HOST_ARRAY,
    ROWS,
    TENSOR_ITEMS,
    DISTRIBUTION,
    CONSTANTS,
    NO_ITEMS,
    OTHER,
    UNKNOWN,
    UNKNOWN_DEVICE,
    AbstractValue,
    Conflict,
    Device,
    Kind,
    Operand,
    Source,
    accel,
    disagree,
    is_constant,
    join_devices,
    join_items,
)
from devlint.analysis.contexts import CallRecord, self_name
from devlint.analysis.literals import is_device_parameter
from devlint.analysis.tree import (
    argument_for,
    code_of_name,
    dotted_name,
    keyword_arg,
    move_target,
    positional_args,
    string_value,
)

if TYPE_CHECKING:
    from devlint.analysis.interpreter import State


_COPIES = frozenset({"copy.deepcopy", "copy.copy"})
_READING = frozenset({"get", "keys", "items", "values", "copy", "to", "cuda", "cpu", "size", "dim"})


class TorchCalls:
    """Call semantics, mixed into `ScopeEvaluator` (which provides `eval`, `bind`,
    `fallback`, `result`, `model` and the scope's names)."""

    def eval_Call(self, node: cst.Call, state: State) -> AbstractValue:
        func = node.func
        qualified = self.qualified(func)
        receiver = callee = None
        if qualified is not None:
            self.result.values[id(func)] = OTHER
        elif type(func) is cst.Attribute:
            receiver = self.eval(func.value, state)
        else:
            callee = self.eval(func, state)
        args = [self.eval(arg.value, state) for arg in node.args]
        result = self._call(node, state, qualified, receiver, callee, args)
        for arg, value in zip(node.args, args):
            if type(arg.value) is cst.Name:
                if value.instance_of:
                    state.forget_attributes(arg.value.value)  # `to_host(runner)` may replace `runner.model`
                state.forget_entries(arg.value.value)  # `to_device(batch)` may replace `batch["x"]`
        if type(func) is cst.Attribute and type(func.value) is cst.Name and func.attr.value not in _READING:
            state.forget_entries(func.value.value)  # `batch.update(...)`, `batch.pop("x")`
        return result

    def _call(self, node: cst.Call, state: State, qualified: str | None, receiver: AbstractValue | None,
              callee: AbstractValue | None, args: list[AbstractValue]) -> AbstractValue:  # fmt: skip
        """A call whose callee (or receiver) and arguments are evaluated."""
        func = node.func
        if any(value.items is not None for value in args):
            self._lists_handed_over(node, qualified, args, state)
        if qualified is not None:
            if qualified.startswith("numpy."):
                if qualified in _ARRAYS and node.args and self._opens_a_picture(node.args[0].value):
                    return _PICTURE_ARRAY  # `np.array(Image.open(p).convert("RGB"))`: rows and columns
                return HOST_ARRAY  # NumPy gives arrays and numbers in host memory, never a tensor
            if T.is_hf_trainer(qualified) and self._trainer_moves(node, args, state):
                return OTHER
            if qualified in _COPIES and len(args) == 1 and not node.args[0].keyword and not node.args[0].star:
                copied = args[0]
                if (copied.is_module or copied.tensor_like) and copied.device.known:
                    # `clone = deepcopy(policy)`: on the device of what it copies, and another
                    # object (moving one in place does not move the other)
                    return replace(copied, origin=node, how=f"a copy of what is on {copied.device}")
            result = self._torch_call(qualified, node, args, state)
            if result == UNKNOWN and not qualified.startswith("torch."):
                self._escape(node, args, state)  # `engine.train(model=net)` may move `net`
            return result
        if receiver is not None:
            key = dotted_name(func)
            if key is not None and key in state.env:
                callee = state.env[key]
            elif self._is_self(func.value):
                callee = self.fallback(f"{self.self_name}.{func.attr.value}")
            else:
                callee = self.handed_attribute(key, state) if key is not None else None
            if callee is None and receiver.is_module and receiver.instance_of and receiver.device.known:
                callee = self._submodule_of(receiver, func.attr.value)  # `target_model.encode(x)`
            if callee is not None:
                callee = self._module_if_evident(callee, func)
            if callee is not None and callee.is_module:
                self.result.values[id(func)] = callee
                if self.is_module_method and self._is_self(func.value) and not callee.device.known:
                    callee = self._own_layer_call(node, callee, args, state)
                if callee.instance_of:
                    # `self.encoder(x, lengths)`: a model of the file, whose `forward` learns the arguments
                    forward = self._method_of_instance(callee, "forward")
                    if forward is not None:
                        self.result.calls.append(CallRecord(forward, node, state.mark(), True, func))
                return self._module_call(node, callee, args)
            if (
                func.attr.value == "forward"
                and receiver.is_module
                and (not self._is_self(func.value) or self._left_on_cpu(receiver))
            ):
                # `model.forward(x)`: a call of the module, as `model(x)` (its parameters
                # learn the arguments all the same); `self.forward(x)` in a method its
                # callers call on a model left on the CPU (`model.infer_image(img)`)
                forward = self._method_of_instance(receiver, "forward")
                if forward is not None:
                    self.result.calls.append(CallRecord(forward, node, state.mark(), True, func.value))
                return self._module_call(node, receiver, args)
            if self._is_self(func.value) and self.cls:
                method = self.model.method(self.cls, func.attr.value)
            else:  # `enc.init_hidden(n)` on an instance of a class of the file
                method = self._method_of_instance(receiver, func.attr.value)
            result = None
            if method is not None:
                result = self._call_function(node, method, args, state, bound=True, receiver=func.value)
            elif receiver.kind is Kind.UNKNOWN and not receiver.device.known:
                result = self._kind_by_method_name(node, func.attr.value, state, func.value)
            if result is None:
                result = self._method_call(node, func.attr.value, receiver, func.value, args, state)
        elif (
            _host_tensors(node)
            and not callee.instance_of
            and not (type(func) is cst.Name and self._of_the_file(func.value))
        ):
            result = self._host_output(node, code_of_name(func, self.model.ctx.module))
        else:
            result = self._plain_call(node, func, callee, args, state)
        if result == UNKNOWN and id(node) not in self.summarised:
            self._escape(node, args, state)
        return result

    def _collate_moves(self, node: cst.Call) -> bool:
        """Does the DataLoader's `collate_fn` (a lambda, or a function of the file) move
        or place tensors (`.to(device)`, `.cuda()`, `device=`)?"""
        arg = keyword_arg(node, "collate_fn")
        if arg is None:
            return False
        value = arg.value
        if type(value) is cst.Name:
            function = self.model.callee(value.value) if value.value not in self.shadowed else None
            if function is None:
                return False
            value = function.body
        elif type(value) is not cst.Lambda:
            return False
        for inner in self.model.ctx.tree.walk(value):
            if type(inner) is cst.Call:
                func = inner.func
                if type(func) is cst.Attribute and func.attr.value in T.MOVE_METHODS and func.attr.value != "cpu":
                    return True
                if keyword_arg(inner, "device") is not None:
                    return True
                # `torch.cuda.LongTensor(x)`, or `FloatTensor(q)` in a file that sets a CUDA
                # default type or imports the name from `torch.cuda` (on some branch)
                name = dotted_name(func) or ""
                qualified = self.qualified(func) or ""
                if qualified in T.LEGACY_CUDA_TYPES or name in self.model.cuda_type_names():
                    return True  # `torch.cuda.FloatTensor(x)`, or a name it may be bound to
                if qualified == "torch.Tensor" and self.model.may_set_cuda_default():
                    return True  # `torch.Tensor(x)` follows the default type, which may be CUDA's
        return False

    def _formatted_on_device(self, node: cst.Call) -> bool:
        """Is the loader's dataset a name the file formats with a device
        (`set_format(..., device=...)`, `with_format(..., device=...)`)?"""
        dataset = keyword_arg(node, "dataset") or next(iter(positional_args(node)), None)
        name = dotted_name(dataset.value) if dataset is not None else None
        return name is not None and name in self.model.formatted_on_device()

    def _host_output(self, node: cst.Call, name: str) -> AbstractValue:
        """`tokenizer(text, return_tensors="pt")`, `tok.encode(..., return_tensors="pt")`:
        a tensor, or a mapping of tensors, made in host memory."""
        return AbstractValue(Kind.BATCH, CPU, None, node, Source.NUMPY, f'{name}(..., return_tensors="pt")')

    def _of_the_file(self, name: str) -> bool:
        """A function or class the file defines under `name` (its own summary decides)."""
        return name not in self.shadowed and (self.model.callee(name) is not None or name in self.model.classes)

    def _module_if_evident(self, value: AbstractValue, expr: cst.BaseExpression) -> AbstractValue:
        """`value` of unknown kind, when the code uses `expr` as only a module is used
        (`evidently_module`): a model with parameters, of a class the analysis cannot
        see, wherever the value says it is."""
        if value.kind is Kind.UNKNOWN and self.evidently_module(expr):
            return replace(value, kind=Kind.MODULE, holds_params=True)
        return value

    def _lists_handed_over(self, node: cst.Call, qualified: str | None, args: list[AbstractValue],
                           state: State) -> None:  # fmt: skip
        """A list built empty here, handed to other code (`collect(outputs)`), may come
        back holding anything; torch, NumPy and the builtins that only read it leave it."""
        func = node.func
        if qualified is not None and qualified.startswith(("torch.", "numpy.")):
            return
        if type(func) is cst.Name and func.value in _READING_BUILTINS and func.value not in state.env:
            return
        for arg, value in zip(node.args, args):
            if value.items is not None and type(arg.value) is cst.Name:
                self.bind(arg.value, replace(value, items=None), state)

    def _escape(self, node: cst.Call, args: list[AbstractValue], state: State) -> None:
        """A module handed to code the analysis cannot see (`accelerator.prepare(model)`,
        `fabric.setup(model)`, a helper) may come back moved: its device is unknown."""
        for arg, value in zip(node.args, args):
            if value.device.known:
                self._moved_elsewhere(arg.value, value, state)

    def _moved_elsewhere(self, expr: cst.BaseExpression, value: AbstractValue, state: State) -> None:
        """A model that code beyond this scope may have moved in place: where is unknown."""
        if value.is_module and dotted_name(expr) is not None:
            elsewhere = replace(value, device=UNKNOWN_DEVICE, origin=None, how="")
            self.bind(expr, elsewhere, state)
            self.move_aliases(dotted_name(expr), value, elsewhere, state)

    def _trainer_moves(self, node: cst.Call, args: list[AbstractValue], state: State) -> bool:
        """`Trainer(model=model, args=...)` of Hugging Face puts a model built on the CPU on
        the accelerator, in place, when it is built: `model` is there afterwards. True where
        that is what the call does to its model (its other arguments are forgotten as usual)."""
        for index, (arg, value) in enumerate(zip(node.args, args)):
            model = (arg.keyword is not None and arg.keyword.value == "model") or (arg.keyword is None and index == 0)
            if model and type(arg.value) is cst.Name and value.is_module and value.holds_params and value.device.is_cpu:
                moved = value.on(accel(None), node, Source.MOVE, "moved to the accelerator by the Trainer")
                self._escape(node, [a if a is not value else OTHER for a in args], state)
                self.bind(arg.value, moved, state)
                self.move_aliases(arg.value.value, value, moved, state)
                return True
        return False

    def _is_self(self, expr: cst.BaseExpression) -> bool:
        return type(expr) is cst.Name and expr.value == self.self_name

    def _kind_by_method_name(self, node: cst.Call, name: str, state: State,
                             receiver: cst.BaseExpression) -> AbstractValue | None:  # fmt: skip
        """`sampler.sample(n)` on an object handed in, where one class of the file alone
        defines `sample`: what kind of value it returns (`t, w = ...` are tensors), not
        where (the object may be another's). The call is recorded for the method's call
        context, which takes it only where the caller's context shows an instance."""
        method = self.model.only_method_named(name)
        if method is not None:
            self.result.calls.append(CallRecord(method, node, state.mark(), True, receiver, by_name=True))
            self._reads_through(method, receiver)
        summary = self.model.summary_of(method) if method is not None else None
        if summary is None or summary.returns is None:
            return None
        return _kind_only(summary.returns)

    def _reads_through(self, method: cst.FunctionDef, receiver: cst.BaseExpression) -> None:
        """`agent.act(s)` on a parameter `agent`: what `act` reads of `self` this function
        reads of `agent` (`agent.Q`), for its callers to say."""
        if type(receiver) is not cst.Name or receiver.value not in self.params:
            return  # (`self.validate()`: what it reads of `self`, this method reads too)
        own = self_name(method) if self.model.class_of.get(id(method)) is not None else None
        if own is None or self.phase1 or method is self.scope:
            return
        for key in self.model.generic_scope(method, []).reads:
            head, _, attr = key.partition(".")
            if head == own and "." not in attr:
                self.result.reads.add(f"{receiver.value}.{attr}")

    def _left_on_cpu(self, own: AbstractValue) -> bool:
        """Is `self`, in a method its caller called on a model of the file's class built
        on the CPU, surely there: a class that neither places itself or its layers nor
        moves its input in `forward`?"""
        if not (own.device.is_cpu and own.source is Source.CONSTRUCTION and own.holds_params):
            return False
        cls = self.model.classes.get(own.instance_of) if own.instance_of else None
        if cls is None or self.model.places_itself(cls) or self.model.moves_its_input(own.instance_of):
            return False
        # a `device` property (`return next(self.parameters()).device`) says where the model is
        return self.model.method(cls, "device") is None

    def _method_of_instance(self, value: AbstractValue, name: str) -> cst.FunctionDef | None:
        """Method `name` of the file's class that `value` is an instance of."""
        cls = self.model.classes.get(value.instance_of) if value.instance_of else None
        return self.model.method(cls, name) if cls is not None else None

    def _plain_call(self, node: cst.Call, func, callee: AbstractValue, args, state: State) -> AbstractValue:
        if callee.transform:
            return self._transformed(node, callee, args)
        if callee.instance_of:
            # an instance of a class of the file called: its `__call__`, or a module's
            # `forward` (whose call a module call decides; its parameters learn the arguments)
            method = self._method_of_instance(callee, "__call__")
            if method is not None:
                result = self._call_function(node, method, args, state, bound=True, receiver=func)
                if result is not None:
                    return result
            elif callee.is_module:
                forward = self._method_of_instance(callee, "forward")
                if forward is not None:
                    self.result.calls.append(CallRecord(forward, node, state.mark(), True, func))
        name = func.value if type(func) is cst.Name else None
        if name is not None and name in self.params and name not in state.env:
            # a parameter called with an accelerator tensor: a caller's CPU model fails here
            for arg, value in zip(node.args, args):
                if arg.keyword is None and not arg.star and value.tensor_like and value.device.is_accel:
                    self.result.param_calls.setdefault(name, Operand(arg.value, value))
                    break
        callee = self._module_if_evident(callee, func)
        if callee.is_module:
            return self._module_call(node, callee, args)
        if self._built_by_type(node):
            # `type(x.data)(n, 1)`: PyTorch 0.3's way to build where `x` is; since 0.4 the type
            # of every tensor is `torch.Tensor`, which builds on the default device
            code = self.model.ctx.module.code_for_node(func)
            return AbstractValue(Kind.TENSOR, state.default, _legacy_rank(node), node, Source.FACTORY, f"{code}(...)")
        if _registry_model(func) and keyword_arg(node, "device") is None:
            # `models.__dict__[args.arch](pretrained=True)`: a model, built where models are
            code = self.model.ctx.module.code_for_node(func.value)
            return AbstractValue(Kind.MODULE, state.default, None, node, Source.CONSTRUCTION, f"{code}[...](...)",
                                 holds_params=True)  # fmt: skip
        if name is not None and name not in self.shadowed:
            function = self.model.callee(name)
            if function is not None:
                result = self._call_function(node, function, args, state, bound=False)
                if result is not None:
                    return result
            local_class = self.model.classes.get(name)
            if local_class is not None:
                wrapper = self.model.wrapper_base(local_class)
                if wrapper is not None:
                    return self._wrapper(wrapper, node, args)
                if self.model.is_module_class(local_class):
                    device = UNKNOWN_DEVICE if self.model.places_itself(local_class) else state.default
                    if any(a.keyword is not None and "device" in a.keyword.value for a in node.args):
                        device = UNKNOWN_DEVICE  # Net(device=d) may build its layers there
                    return AbstractValue(Kind.MODULE, device, None, node, Source.CONSTRUCTION, f"{name}()",
                                         holds_params=self.model.holds_params(local_class),
                                         instance_of=name,
                                         # `if torch.cuda.is_available(): self.cuda()` in `__init__`
                                         maybe_accel=self.model.moves_itself(local_class))  # fmt: skip
                return AbstractValue(Kind.OTHER, instance_of=name)
            if name == "next" and args and args[0].kind is Kind.DATALOADER:
                if not args[0].device.is_cpu:  # its `collate_fn` places the batch
                    return AbstractValue(Kind.BATCH, UNKNOWN_DEVICE, False, node)
                return AbstractValue(Kind.BATCH, CPU, False, node, Source.LOADER, "a DataLoader batch")
            if name == "iter" and args and args[0].kind is Kind.DATALOADER:
                return args[0]
            if name in ("list", "tuple") and len(args) == 1 and not node.args[0].keyword and not node.args[0].star:
                if args[0].items is not None and args[0].items is not NO_ITEMS and name not in state.env:
                    return replace(args[0], items=args[0].items)  # `list(x.to(d) for x in xs)`: the same items
            if name in T.BUILTINS_OTHER and callee.kind is Kind.OTHER:
                return OTHER
        if name is not None and name in self.params and callee.kind is Kind.UNKNOWN:
            # `net(data)` with a model handed in: its output may be where its input is
            if any(v.may_be_accel_tensor for a, v in zip(node.args, args) if a.keyword is None):
                return AbstractValue(maybe_accel=True)
        return UNKNOWN

    def _argument(self, name: str, expr: cst.BaseExpression, value: AbstractValue, state: State) -> AbstractValue:
        """What a function of the file is given for parameter `name`: a device for a
        device parameter (`preprocess(obs, device=self.device)` builds where `self.device`
        names, as `torch.tensor(..., device=self.device)` would)."""
        value = _constant(expr, value)
        if value.device.known or is_constant(value) or value.kind not in (Kind.UNKNOWN, Kind.OTHER, Kind.DEVICE):
            return value
        if is_device_parameter(self.model.ctx, name):
            device = self.device_at(expr, state)
            if device.known:
                return AbstractValue(Kind.DEVICE, device)
        return value

    def _forward_returned(self, module: AbstractValue) -> AbstractValue | None:
        """What the `forward` of a model of the file returns, for any caller."""
        forward = self._method_of_instance(module, "forward") if module.instance_of else None
        summary = self.model.summary_of(forward) if forward is not None else None
        return summary.returns if summary is not None else None

    def _type_of_tensor(self, func: cst.BaseExpression) -> bool:
        """`type(x)` of a tensor `x` (or of `x.data`)."""
        if type(func) is not cst.Call or type(func.func) is not cst.Name or func.func.value != "type":
            return False
        if "type" in self.shadowed or len(func.args) != 1 or func.args[0].keyword is not None:
            return False
        return self.result.values.get(id(func.args[0].value), UNKNOWN).tensor_like

    def _built_by_type(self, node: cst.Call) -> bool:
        """`type(x)(n, m)`, `type(x)([1, 2])`: sizes or data, not a tensor to wrap (a
        `Parameter` or a tensor subclass wrapping one keeps that tensor's device)."""
        if not self._type_of_tensor(node.func):
            return False
        return not any(self.result.values.get(id(arg.value), UNKNOWN).tensor_like or arg.star for arg in node.args)

    def _call_function(self, node: cst.Call, function: cst.FunctionDef, args: list[AbstractValue], state: State,
                       *, bound: bool, receiver: cst.BaseExpression | None = None) -> AbstractValue | None:  # fmt: skip
        """A call of a function (or `self.` method) of this file, through its summary:
        what it returns, and the CPU models it is given where it calls them with
        accelerator tensors. None when the function has no summary. The call is recorded
        for the function's call context (`contexts.py`)."""
        self.result.calls.append(CallRecord(function, node, state.mark(), bound, receiver))
        if bound and receiver is not None:
            self._reads_through(function, receiver)
        summary = self.model.summary_at(function, state if type(self.scope) is cst.Module else None)
        if summary is None:
            return None
        self.summarised.add(id(node))  # what it does to a model handed in is known (`moved_params`)
        names = self.model.parameter_names(function, bound)
        arguments: dict[str, tuple[cst.BaseExpression, AbstractValue]] = {}
        for index, (arg, value) in enumerate(zip(node.args, args)):
            if arg.star:
                break
            if arg.keyword is not None:
                arguments[arg.keyword.value] = (arg.value, value)
            elif index < len(names):
                arguments[names[index]] = (arg.value, value)
        values = {name: self._argument(name, expr, value, state) for name, (expr, value) in arguments.items()}
        if not any(arg.star for arg in node.args):
            for name, default in _constant_defaults(function).items():  # `def load(path, device=None)`
                values.setdefault(name, default)
        for name in summary.moved_params:  # `prepare(model)` moves it in place
            if name in arguments:
                self._moved_by(function, node, summary.moved_to.get(name), arguments[name], values, bound, state)
        for name, operand in summary.param_calls.items():
            expr, value = arguments.get(name, (None, UNKNOWN))
            if expr is not None and value.is_module and value.holds_params and value.device.is_cpu:
                other = self.model.operand_at_call(function, operand, bound, values)
                self._conflict(Conflict(node, Operand(expr, value), other, "module"))
            elif type(expr) is cst.Name and expr.value in self.params and expr.value not in state.env:
                # a parameter of this scope handed on to a function that calls it with an
                # accelerator tensor: this scope calls it so too
                other = self.model.operand_at_call(function, operand, bound, values)
                if other.value.device.is_accel:
                    self.result.param_calls.setdefault(expr.value, other)
        if summary.yields is not None:
            self.generated[id(node)] = self.model.at_call(function, summary.yields, values, bound)
            return OTHER  # a generator
        if bound and receiver is not None and not self.phase1:
            # `self.get_mask()` in a method of a moved model, or `vae.inference(n=10)` on a
            # moved model of the file: its mask, its samples, are where the model is
            if self._is_self(receiver):
                own = self.params.get(self.self_name)
                attributes = self._self_attributes(state)
            else:
                own, attributes = self.result.values.get(id(receiver)), {}
            unknown = summary.returns is None or not summary.returns.device.known
            if not unknown:  # `return self.decoder(z, c)`: known only where `c` is given
                unknown = not self.model.at_call(function, summary.returns, values, bound).device.known
            if unknown and own is not None and own.is_module and own.device.known:
                returned = self.model.returns_for_call(function, own, values, attributes)
                if returned is not None:
                    return self.model.at_call(function, returned, values, bound)
        returned = UNKNOWN if summary.returns is None else self.model.at_call(function, summary.returns, values, bound)
        given = [v for v in values.values() if v.is_tensor and v.device.known]
        accelerated = any(v.device.is_accel for v in given)
        if (
            not bound
            and not self.phase1
            and given
            and (not returned.device.known or (returned.device.is_cpu and accelerated))
        ):
            # `rescale(img, (0, 255), (-1, 1))`: what the body computes from a tensor it is
            # given is where that tensor is. A CPU result for any caller (a CPU factory
            # times a parameter) is not one for a caller passing an accelerator tensor.
            rerun = self.model.returns_for_call(function, None, values, {})
            if rerun is not None and (rerun.device.known or rerun.maybe_accel or rerun.kind is Kind.OTHER):
                return self.model.at_call(function, rerun, values, bound)
            if returned.device.is_cpu and accelerated:  # (a known CPU result: `summary.returns` is set)
                return replace(returned, device=UNKNOWN_DEVICE, origin=None, how="")
        elif not self.phase1 and _maybe_somewhere(returned) and any(is_constant(v) for v in values.values()):
            # `converter(batch)` of `__call__(self, batch, device=None)`, which moves what it
            # makes only where it is given a device: this call's `None` decides it
            own = self.result.values.get(id(receiver)) if bound and receiver is not None else None
            if not bound or (own is not None and own.instance_of and not own.is_module):
                rerun = self.model.returns_for_call(function, own, values, {})
                if rerun is not None:
                    return self.model.at_call(function, rerun, values, bound)
        if summary.returns is None:
            return None
        through = self.model.passed_on(function)
        if through is not None:
            returned = self._passed_on(returned, through, values)
        return returned

    def _moved_by(self, function: cst.FunctionDef, node: cst.Call, moved: AbstractValue | None,
                  argument: tuple[cst.BaseExpression, AbstractValue], values: dict[str, AbstractValue], bound: bool,
                  state: State) -> None:  # fmt: skip
        """A model handed to a function of the file that moves it in place (`def fit(net):
        net.to(device)`): where every path leaves it, as the caller names that device, or
        somewhere unknown."""
        expr, value = argument
        where = self.model.at_call(function, moved, values, bound).device if moved is not None else UNKNOWN_DEVICE
        if not value.is_module or dotted_name(expr) is None or not where.known:
            self._moved_elsewhere(expr, value, state)
            return
        how = f"moved by `{code_of_name(node.func, self.model.ctx.module)}()`"
        placed = value.on(where, node, Source.MOVE, how)
        self.bind(expr, placed, state)
        self.move_aliases(dotted_name(expr), value, placed, state)

    def _passed_on(self, returned: AbstractValue, through: tuple, values: dict[str, AbstractValue]) -> AbstractValue:
        """What a function that returns items of its parameters (`return loss, out["feat"]`)
        returns to this call, where its summary could not tell: the items of the arguments."""

        def item(entry, known: AbstractValue) -> AbstractValue:
            if entry is None or known.kind is not Kind.UNKNOWN or known.device.known:
                return known
            name, subscript = entry
            argument = values.get(name)
            return known if argument is None else self.item_of(subscript, argument)

        if through[0] == "single":
            return item(through[1], returned)
        if returned.elements is None or len(returned.elements) != len(through[1]):
            return returned
        return replace(returned, elements=tuple(item(e, v) for e, v in zip(through[1], returned.elements)))

    def _self_attributes(self, state: State) -> dict[str, AbstractValue]:
        """`self.<attr>` (by attr) as this method knows it here: bound on its path, or
        passed by its callers."""
        prefix = f"{self.self_name}."
        known = {}
        if self.context is not None:
            known.update((k[len(prefix) :], v) for k, v in self.context.names.items() if k.startswith(prefix))
        known.update((k[len(prefix) :], state.env[k]) for k in state.dotted if k.startswith(prefix) and k in state.env)
        return {attr: value for attr, value in known.items() if "." not in attr}

    def _traced(self, node: cst.Call, args: list[AbstractValue]) -> AbstractValue:
        """`writer.add_graph(model, images)`, `torch.jit.trace(model, example)`,
        `torch.onnx.export(model, x, path)`: the model runs on the example inputs."""
        positional = [(a, v) for a, v in zip(node.args, args) if a.keyword is None and not a.star]
        if len(positional) >= 2 and positional[0][1].is_module:
            module = positional[0][1]
            example, value = positional[1]
            if module.holds_params and module.device.known and value.tensor_like:
                self._check_module_inputs(
                    node, Operand(positional[0][0].value, module), [Operand(example.value, value)]
                )
            # they neither move nor keep the model: `torch.jit.trace` gives a module where it is
            return replace(module, origin=node, how="") if module.holds_params else OTHER
        return UNKNOWN

    def _own_layer_call(self, node: cst.Call, layer: AbstractValue, args: list[AbstractValue],
                        state: State) -> AbstractValue:  # fmt: skip
        """`self.pos_emb(torch.LongTensor(...))` in a module's method: the module's own
        layer is where the module is, which is where its input is (`x.device`, SPEC §4).
        A tensor the method builds on the CPU fails there once the module is moved; the
        layer's output is then taken where the layer is (what the fix makes it), so that
        what follows from it is not reported again."""
        if (layer.layer not in T.PARAMETER_LAYERS and layer.layer != "torch.nn.Sequential") or not layer.holds_params:
            return layer
        inputs = self._input_devices(state)
        if not inputs:
            return layer
        for arg, value in zip(node.args, args):
            if arg.keyword is not None or arg.star:
                continue
            made_here = value.origin is not None and id(value.origin) in self.result.values
            if value.is_tensor and value.device.is_cpu and value.source is Source.FACTORY and made_here:
                home = replace(layer, device=inputs[0], origin=None, how="")
                self._conflict(Conflict(node, Operand(arg.value, value), Operand(node.func, home), "module"))
                return home
        return layer

    def _module_call(self, node: cst.Call, module: AbstractValue, args: list[AbstractValue]) -> AbstractValue:
        """A module called with tensors (see `_module_output`), and the shape of what a
        recurrent layer returns: `out, (h, c) = self.lstm(x)`."""
        output = self._module_output(node, module, args)
        if module.layer in T.RECURRENT_LAYERS and output.device.known:
            tensor = AbstractValue(Kind.TENSOR, output.device, False, output.origin, output.source, output.how)
            state = replace(OTHER, elements=(tensor, tensor)) if module.layer == "torch.nn.LSTM" else tensor
            return replace(output, elements=(tensor, state))
        return output

    def _module_output(self, node: cst.Call, module: AbstractValue, args: list[AbstractValue]) -> AbstractValue:
        """A module called with tensors: against the module's own device when it holds
        parameters, and against each other (positional, keyword, packed in tuples) when
        it is a torch.nn layer, whose inputs must share one device."""
        layer = module.layer
        torch_layer = layer.startswith("torch.nn.") and layer not in T.MIXED_INPUT_LAYERS
        tensors = self._call_operands(node, args, keywords=torch_layer or module.stateless, packed=torch_layer)
        if not torch_layer and not module.stateless:
            # `model.generate(input_ids=ids)`: the inputs a Hugging Face model is known to take;
            # `actor(s=s, s_hist=h)`: any input of a model of the file but its lengths
            tensors += [
                Operand(arg.value, value)
                for arg, value in zip(node.args, args)
                if arg.keyword is not None
                and value.tensor_like
                and (
                    arg.keyword.value in T.MODEL_INPUT_KEYWORDS
                    or (module.instance_of and "len" not in arg.keyword.value.lower() and not _names_lengths(arg.value))
                )
            ]
        if not torch_layer and node.args and node.args[0].keyword is None and not node.args[0].star:
            first = node.args[0].value
            if type(first) in (cst.Tuple, cst.List):  # `model([ids, lengths, mask])`: the inputs, packed
                packed = [
                    Operand(e.value, self.result.values.get(id(e.value), UNKNOWN))
                    for e in first.elements
                    if type(e) is not cst.StarredElement
                ]
                tensors = [o for o in packed if o.value.tensor_like] + tensors
        if layer in (T.MOVES_INPUTS, T.MOVES_INPUTS_WHEN_MOVED):
            tensors = [o for o in tensors if not o.value.device.is_cpu]  # it moves CPU inputs itself
        maybe = module.maybe_accel or any(o.value.maybe_accel for o in tensors)
        if module.holds_params and module.device.known:
            if not torch_layer:
                # a model's own signature is not known: sequence lengths go in on the CPU
                # (`model(ids, lengths)` for `pack_padded_sequence`)
                tensors = tensors[:1] + [o for o in tensors[1:] if not _names_lengths(o.expr)]
            if self.model.moves_its_input(module.instance_of):
                tensors = []  # its `forward` puts its input where it wants it (`x = x.to(self.device)`)
            self._check_module_inputs(node, Operand(node.func, module), tensors)
            returns = self.model.forward_returns(module.instance_of) if module.instance_of else ""
            if returns == "other":
                return UNKNOWN  # `out, lengths = encoder(x, n)`: the lengths are on the CPU
            tensor = returns == "tensor" or layer == T.AUDIO_TRANSFORM
            kind = Kind.TENSOR if tensor else Kind.UNKNOWN  # a tensor's items are tensors (`out[0][0]`)
            output = AbstractValue(kind, module.device, None, module.origin, module.source, module.how)
            returned = self._forward_returned(module)
            if returned is not None and returned.elements is not None:
                # `return loss, kl.item(), acc`: a number among the outputs is no tensor
                items = tuple(item if item.kind is Kind.OTHER else output for item in returned.elements)
                return replace(output, elements=items)
            return output
        if (
            module.holds_params
            and module.maybe_accel
            and layer not in (T.MOVES_INPUTS, T.MOVES_INPUTS_WHEN_MOVED)
            and not self.model.moves_its_input(module.instance_of)
            and not self._under_device_choice()
        ):
            for operand in tensors:
                if _unmoved_host_tensor(operand):
                    module_side = Operand(node.func, replace(module, device=accel(None)))
                    self._conflict(Conflict(node, operand, module_side, "module"))
                    break
        if module.stateless and layer not in T.MIXED_INPUT_LAYERS:
            # a loss is an operation on its inputs, and no CPU scalar may join them
            self._check_operands(node, tensors, elementwise=False)
            if id(node) not in self.result.conflicts:
                maybe = [
                    Operand(a.value, v)
                    for a, v in zip(node.args, args)
                    if not a.star and v.maybe_accel and v.kind is Kind.UNKNOWN and not v.device.known
                ]  # `loss_fn(model(x), y)`: a model's output where the model may have moved
                self._check_maybe_operands(node, tensors + maybe)
        elif torch_layer and len(tensors) > 1:
            self._check_operands(node, tensors, elementwise=False)  # `self.lstm(x, (h0, c0))`
        if module.maybe_accel and module.instance_of and self.model.moves_its_input(module.instance_of):
            # a model that placed itself and whose `forward` puts its input where it is (`x =
            # x.cuda()`): its output is there too, wherever the input was, where `forward`
            # returns a tensor (not `out.cpu()`, `.item()`, an array or a tuple)
            returned = self._forward_returned(module)
            if returned is not None and returned.elements is not None:  # `return h, h.cpu().numpy()`
                return replace(returned, elements=tuple(_where_placed(item) for item in returned.elements))
            if returned is not None:
                placed = _where_placed(returned)
                if placed is not returned or returned.device.is_cpu:
                    return placed
        known = [o.value for o in tensors if o.value.device.known]
        if known and layer != T.MOVES_INPUTS:
            deciding = [v for v in known if v.device.is_accel] or known
            first = deciding[0]
            device = first.device
            for value in deciding[1:]:
                device = join_devices(device, value.device)
            origin = first.origin if device == first.device else None
            return AbstractValue(Kind.UNKNOWN, device, None, origin, first.source, first.how if origin else "")
        return AbstractValue(maybe_accel=True) if maybe else UNKNOWN

    def _call_operands(
        self, node: cst.Call, args: list[AbstractValue], *, keywords: bool, packed: bool
    ) -> list[Operand]:
        """The tensor arguments of a call: positional ones, keyword ones with `keywords`,
        and the elements of tuple or list literals with `packed` (`(h0, c0)`)."""
        operands = []
        for arg, value in zip(node.args, args):
            if arg.star == "**" and value.kind is Kind.BATCH and value.device.known:
                operands.append(Operand(arg.value, value))  # `model(**inputs)`: the tokenizer's tensors
                continue
            if arg.star or (arg.keyword is not None and not keywords):
                continue
            inner = arg.value
            if packed and type(inner) in (cst.Tuple, cst.List):
                for element in inner.elements:
                    if type(element) is not cst.StarredElement:
                        item = self.result.values.get(id(element.value), UNKNOWN)
                        if item.tensor_like:
                            operands.append(Operand(element.value, item))
            elif value.tensor_like:
                operands.append(Operand(inner, value))
            elif packed and value.elements is not None:
                # `self.lstm(x, self.hidden)` with `self.hidden = (h0, c0)` made elsewhere
                operands += [Operand(inner, item) for item in value.elements if item.tensor_like]
        return operands

    # -- torch.* -----------------------------------------------------------------------

    def _torch_call(self, qualified: str, node: cst.Call, args: list[AbstractValue], state: State) -> AbstractValue:
        short = code_of_name(node.func, self.model.ctx.module)
        if qualified in T.TRACING_FUNCTIONS:
            return self._traced(node, args)
        if qualified in T.COMPILING_FUNCTIONS and args and node.args[0].keyword is None:
            # `torch.jit.script(model)`, `torch.compile(model)`: the model, compiled, where it
            # is; it shares the model's parameters (a move of either moves both), where
            # `torch.jit.freeze` bakes them into constants of a new module
            module = args[0]
            if module.is_module and module.holds_params:
                return module if qualified in T.SHARING_COMPILERS else replace(module, origin=node, how="")
        if qualified in T.GRAD_NORM_FUNCTIONS and node.args:
            # `clip_grad_norm_(model.parameters(), c)`: the total norm, a 0-dim tensor where
            # the parameters are
            first = node.args[0].value
            if type(first) is cst.Call and type(first.func) is cst.Attribute and first.func.attr.value == "parameters":
                owner = self.result.values.get(id(first.func.value), UNKNOWN)
                if owner.is_module and owner.device.known:
                    return AbstractValue(Kind.TENSOR, owner.device, True, node, Source.MOVE, short)
            return AbstractValue(Kind.TENSOR, zero_dim=True)
        if qualified in T.FACTORIES:
            return self._factory(qualified, short, node, args, state)
        if qualified in T.LIKE_FACTORIES:
            positional = [v for a, v in zip(node.args, args) if a.keyword is None]
            base = positional[0] if positional else UNKNOWN
            device_arg = keyword_arg(node, "device")
            if device_arg is not None:
                self._snapshot(node, state)
                device = self.device_at(device_arg.value, state)
                return AbstractValue(Kind.TENSOR, device, base.zero_dim, node, Source.FACTORY, f"{short}(device=...)")
            return AbstractValue(Kind.TENSOR, base.device, base.zero_dim, base.origin, base.source, base.how)
        if qualified in T.LEGACY_CPU_TYPES:
            return AbstractValue(Kind.TENSOR, state.default, _legacy_rank(node), node, Source.FACTORY, f"{short}(...)")
        if qualified in T.LEGACY_CUDA_TYPES:
            return AbstractValue(Kind.TENSOR, accel('"cuda"'), None, node, Source.FACTORY, f"{short}(...)")
        if qualified in T.CPU_SOURCES:
            return AbstractValue(Kind.TENSOR, CPU, None, node, Source.NUMPY, f"{short}(...)")
        if qualified.startswith("torchvision.transforms.") and qualified.rsplit(".", 1)[-1][:1].isupper():
            return self._transform(qualified, node)
        if qualified in T.ALBUMENTATIONS_COMPOSE:
            return self._albumentations(node)
        if qualified.startswith("torchvision.datasets.") and qualified.rsplit(".", 1)[-1][:1].isupper():
            # `MNIST(root, transform=ToTensor())`: `ds[i]` is a CPU tensor and its label
            transform = keyword_arg(node, "transform")
            made = self.result.values.get(id(transform.value), UNKNOWN) if transform is not None else UNKNOWN
            if made.transform == "cpu" and not self.model.set_from_outside("transform"):
                return AbstractValue(Kind.OTHER, transform=TENSOR_ITEMS)  # (`ds.transform = ...` may move)
            return UNKNOWN
        if qualified.startswith("torchaudio.transforms.") and qualified.rsplit(".", 1)[-1][:1].isupper():
            # `Resample(sr, target)`, `MelSpectrogram(...)`: modules whose buffers (kernels,
            # windows, filter banks) are where the module is; they map tensors to tensors
            buffers = qualified.rsplit(".", 1)[-1] in T.AUDIO_TRANSFORMS_WITH_BUFFERS
            return AbstractValue(Kind.MODULE, state.default, None, node, Source.CONSTRUCTION, f"{short}(...)",
                                 holds_params=buffers, stateless=not buffers, layer=T.AUDIO_TRANSFORM)  # fmt: skip
        if qualified == "torch.accelerator.current_accelerator":
            return AbstractValue(Kind.DEVICE, accel(short + "()"), source=Source.LITERAL)
        if qualified == "torch.device":
            return AbstractValue(Kind.DEVICE, self._device_call(node, state), source=Source.LITERAL)
        if qualified in T.VARIABLE_WRAPPERS:
            return args[0] if args and node.args[0].keyword is None else UNKNOWN  # the tensor it wraps
        if qualified in T.PARAMETER_CLASSES:
            data = args[0] if args else UNKNOWN
            return AbstractValue(Kind.TENSOR, data.device, data.zero_dim, data.origin, data.source, data.how,
                                 is_parameter=True)  # fmt: skip
        if qualified == "torch.set_default_device":
            state.default = self.device_at(node.args[0].value, state) if node.args else UNKNOWN_DEVICE
            return OTHER
        if qualified in T.TENSOR_DATASETS:
            # `TensorDataset(ids.to(device), ...)`: its items are where its tensors are
            found = replace(OTHER, holds_accel=any(v.may_be_accel_tensor for v in args))
            given = [v for a, v in zip(node.args, args) if a.keyword is None and not a.star]
            if (
                given
                and len(given) == len(node.args)
                and all(v.is_tensor and v.device.known for v in given)
                and not self.model.set_from_outside("tensors")  # `ds.tensors = (...)`: moved later
            ):
                found = replace(found, transform=ROWS, elements=tuple(given))  # `x, y = ds[i]`
            return found
        if qualified in T.RANDOM_SPLITS and args and args[0].transform == ROWS and len(node.args) >= 2:
            # `train, valid = random_split(ds, [0.8, 0.2])`: subsets whose items are the dataset's
            lengths = node.args[1].value
            if type(lengths) in (cst.List, cst.Tuple) and not any(
                type(e) is cst.StarredElement for e in lengths.elements
            ):
                return replace(OTHER, elements=(args[0],) * len(lengths.elements))
            return UNKNOWN
        if qualified in T.DATALOADERS:
            # a `collate_fn` of the file that moves the batch makes batches on its device, as
            # does a Hugging Face dataset formatted there (`ds.set_format("torch", device="cuda")`)
            given = argument_for(node, "dataset", 0)  # `DataLoader(dataset=val, ...)` too
            dataset = self.result.values.get(id(given.value), UNKNOWN) if given is not None else UNKNOWN
            placed = self._collate_moves(node) or self._formatted_on_device(node) or dataset.holds_accel
            placed = placed or (dataset.instance_of != "" and self.model.places_items(dataset.instance_of))
            device = UNKNOWN_DEVICE if placed else CPU
            return AbstractValue(Kind.DATALOADER, device, None, node, Source.CONSTRUCTION, "DataLoader(...)")
        last = qualified.rsplit(".", 1)[-1]
        if qualified in T.MODULE_WRAPPERS:
            return self._wrapper(qualified, node, args)
        if (
            last[:1].isupper()
            and (qualified.count(".") == 2 or qualified.startswith("torch.nn.modules."))
            and qualified.startswith("torch.nn.")
        ):
            return self._layer(qualified, short, node, args, state)
        owner, _, method = qualified.rpartition(".")
        if owner.startswith("torch.nn.") and owner.count(".") == 2 and owner.rsplit(".", 1)[-1][:1].isupper():
            # a class method of a layer: `nn.Embedding.from_pretrained(table)` is a module
            # whose weight is that tensor, where the tensor is
            if method != "from_pretrained":
                return UNKNOWN
            layer = self._layer(owner, short, node, args, state)
            data = args[0] if args and node.args[0].keyword is None else UNKNOWN
            return replace(layer, device=data.device if data.tensor_like else UNKNOWN_DEVICE)
        if any(qualified.startswith(p) for p in T.MODEL_FACTORIES) or T.is_pretrained_model(qualified):
            placing = ("device_map", "device", "quantization_config", "load_in_8bit", "load_in_4bit")
            placed = any(keyword_arg(node, keyword) is not None for keyword in placing) or any(
                arg.star == "**" for arg in node.args
            )
            device = UNKNOWN_DEVICE if placed else state.default  # quantised models are placed, and cannot move
            return AbstractValue(
                Kind.MODULE, device, None, node, Source.CONSTRUCTION, f"{short}(...)", holds_params=True
            )
        if qualified.startswith("torch.distributions.") and last[:1].isupper():
            return self._distribution(node, args)
        if qualified in T.NON_TENSOR_FUNCTIONS or qualified.startswith(T.NOT_OP_NAMESPACES):
            return OTHER if qualified in T.NON_TENSOR_FUNCTIONS else UNKNOWN
        if qualified.startswith(T.OP_NAMESPACES) and last[:1].islower():
            return self._torch_op(qualified, node, args)
        return UNKNOWN

    def _distribution(self, node: cst.Call, args: list[AbstractValue]) -> AbstractValue:
        """`Categorical(logits=out)`, `Normal(mu, std)`: a distribution, where its tensor
        parameters are (a number as a parameter goes with the others)."""
        tensors = [
            Operand(a.value, replace(v, kind=Kind.TENSOR) if v.transform == DISTRIBUTION else v)
            for a, v in zip(node.args, args)
            if v.tensor_like or v.maybe_accel or v.transform == DISTRIBUTION  # `Independent(Normal(...), 1)`
        ]
        if not tensors:
            return AbstractValue(Kind.OTHER, transform=DISTRIBUTION)
        on = self._result_on(tensors, None)
        return replace(on, kind=Kind.OTHER, zero_dim=None, transform=DISTRIBUTION)

    def _sampled(self, node: cst.Call, name: str, distribution: AbstractValue) -> AbstractValue:
        """`dist.sample()`, `dist.log_prob(a)`: a tensor where the distribution is."""
        if name not in T.DISTRIBUTION_METHODS:
            return UNKNOWN
        return replace(distribution, kind=Kind.TENSOR, transform="", zero_dim=None)

    def _wrapper(self, qualified: str, node: cst.Call, args: list[AbstractValue]) -> AbstractValue:
        """`DataParallel(model)` (or an instance of the file's subclass of it) holds
        `model`, wherever that is, and moves its inputs."""
        wrapped = args[0] if args and node.args[0].keyword is None else UNKNOWN
        if not wrapped.is_module:
            return UNKNOWN
        moves = qualified in T.INPUT_MOVING_WRAPPERS or (
            keyword_arg(node, "device_ids") is not None or len(positional_args(node)) > 1
        )
        return replace(wrapped, layer=T.MOVES_INPUTS) if moves else wrapped

    def _transform(self, qualified: str, node: cst.Call) -> AbstractValue:
        """A torchvision transform: `ToTensor()` (or a `Compose` with one) makes a CPU
        tensor of a picture; the others keep their input's device."""
        last = qualified.rsplit(".", 1)[-1]
        if last == "Lambda" or "PIL" in last:
            return OTHER  # it may move what it is given; `ToPILImage()` makes a picture
        makes = last in T.TENSOR_MAKING_TRANSFORMS
        if last == "Compose":
            if not node.args or type(node.args[0].value) not in (cst.List, cst.Tuple):
                return OTHER
            for element in node.args[0].value.elements:
                found = self.result.values.get(id(element.value), UNKNOWN)
                if not found.transform:
                    return OTHER  # a step of its own (`Lambda`, a custom class) may move the tensor
                makes = makes or found.transform == "cpu"
        return AbstractValue(Kind.OTHER, transform="cpu" if makes else "keep")

    def _submodule_of(self, model: AbstractValue, attr: str) -> AbstractValue | None:
        """Submodule `attr` of a model of the file's class, built in `__init__` and left
        alone after: where the model is (`model.to(device)` moved it too)."""
        cls = self.model.classes.get(model.instance_of)
        if cls is None or self.model.method(cls, attr) is not None:
            return None
        value = self.model.summary(cls).get(attr)
        if value is None or not value.is_module or not value.holds_params or self.model.places_itself(cls):
            return None
        changed = self.model.changed_after_init(cls)
        if changed is None or attr in changed or self.model.touched_outside(attr):
            return None
        if self.model.walks_submodules():
            return None  # `for m in net.modules(): ... m.cpu()` may have sent it elsewhere
        return replace(value, device=model.device, origin=model.origin, source=model.source, how=model.how,
                       maybe_accel=model.maybe_accel, instance_of="")  # fmt: skip

    def _albumentations(self, node: cst.Call) -> AbstractValue:
        """`A.Compose([..., ToTensorV2()])`: a pipeline whose output holds CPU tensors (it
        gives NumPy arrays without `ToTensorV2`)."""
        steps = node.args[0].value if node.args and node.args[0].keyword is None else None
        if type(steps) not in (cst.List, cst.Tuple):
            return OTHER
        for element in steps.elements:
            value = element.value
            if type(value) is cst.Call and (self.qualified(value.func) or "") in T.ALBUMENTATIONS_TO_TENSOR:
                return AbstractValue(Kind.OTHER, transform=ALBUMENTATIONS)
        return OTHER

    def _transformed(self, node: cst.Call, transform: AbstractValue, args: list[AbstractValue]) -> AbstractValue:
        """What a torchvision transform returns: a new CPU tensor, or its input where it was;
        what an albumentations pipeline returns: a mapping of CPU tensors (`out["image"]`)."""
        if transform.transform == ALBUMENTATIONS:
            code = code_of_name(node.func, self.model.ctx.module)
            return AbstractValue(Kind.BATCH, CPU, None, node, Source.FACTORY, f"{code}(...)")
        first = args[0] if args and node.args[0].keyword is None else UNKNOWN
        if transform.transform == "cpu" and not first.tensor_like:
            # of a picture or an array; a tensor given to `v2.ToImage()` stays where it is
            code = code_of_name(node.func, self.model.ctx.module)
            return AbstractValue(Kind.TENSOR, CPU, False, node, Source.FACTORY, f"{code}(...)")
        return replace(first, kind=Kind.TENSOR, is_parameter=False) if first.tensor_like else UNKNOWN

    def _layer(self, qualified: str, short: str, node: cst.Call, args, state: State) -> AbstractValue:
        """A torch.nn module built here: on the default device unless told otherwise, and
        whether it holds parameters or buffers."""
        holds = qualified in T.PARAMETER_LAYERS
        stateless = qualified in T.PARAMETERLESS_LAYERS
        if qualified in T.WEIGHTED_LOSSES:
            holds = keyword_arg(node, "weight") is not None or keyword_arg(node, "pos_weight") is not None
            stateless = not holds and not any(a.star for a in node.args)
        elif qualified in T.OPTIONAL_STATE_LAYERS:
            holds = any(is_true_arg(keyword_arg(node, k)) for k in T.OPTIONAL_STATE_LAYERS[qualified])
        elif qualified in T.MODULE_CONTAINERS:
            # `nn.Sequential(conv, ...)`, also `nn.Sequential(OrderedDict([("fc", nn.Linear(...))]))`
            holds = any(v.holds_params for v in args) or any(
                self.result.values.get(id(inner), UNKNOWN).holds_params
                for arg in node.args
                for inner in self.model.ctx.tree.walk(arg.value)
            )
        device_arg = keyword_arg(node, "device")
        weight = keyword_arg(node, "weight") or keyword_arg(node, "pos_weight")
        if device_arg is not None:
            device = self.device_at(device_arg.value, state)
        elif any(a.star == "**" for a in node.args):
            device = UNKNOWN_DEVICE  # `**factory_kwargs` may carry device=
        elif qualified in T.WEIGHTED_LOSSES and weight is not None:
            # a loss holds only its weight: it is where the weight tensor is
            given = self.result.values.get(id(weight.value), UNKNOWN)
            device = given.device if given.tensor_like else UNKNOWN_DEVICE
        else:
            device = state.default
        return AbstractValue(Kind.MODULE, device, None, node, Source.CONSTRUCTION, f"{short}(...)",
                             holds_params=holds, stateless=stateless, layer=qualified)  # fmt: skip

    def _factory(self, qualified: str, short: str, node: cst.Call, args, state: State) -> AbstractValue:
        self._snapshot(node, state)
        positional = [a for a in node.args if a.keyword is None]
        device_arg = keyword_arg(node, "device")
        if device_arg is not None:
            device = self.device_at(device_arg.value, state)
            how = f"{short}(device={self.model.ctx.module.code_for_node(device_arg.value)})"
        elif any(a.star == "**" for a in node.args):
            device, how = UNKNOWN_DEVICE, ""  # `**factory_kwargs` may carry device=
        elif qualified in T.DATA_FACTORIES and positional:
            data = self.result.values.get(id(positional[0].value), UNKNOWN)
            if data.kind is Kind.TENSOR:
                device = data.device
            elif data.kind is Kind.OTHER or (
                qualified == "torch.tensor" and self._host_data(positional[0].value, data, state)
            ):
                device = state.default
            else:
                device = UNKNOWN_DEVICE
            how = f"{short} without device="
        elif qualified in T.SPARSE_VALUES_POSITION:
            position = T.SPARSE_VALUES_POSITION[qualified]
            values = positional[position].value if len(positional) > position else None
            data = self.result.values.get(id(values), UNKNOWN) if values is not None else UNKNOWN
            if data.tensor_like:
                device = data.device  # `sparse_coo_tensor(i, v)`: where `v` is
            elif data.kind is Kind.OTHER:
                device = state.default  # values given as a list of numbers
            else:
                device = UNKNOWN_DEVICE
            how = f"{short} without device="
        elif qualified in T.TENSOR_ARGUMENT_FACTORIES and positional:
            device = self.result.values.get(id(positional[0].value), UNKNOWN).device
            how = f"{short}(...)"
        else:
            device = state.default
            how = f"{short} without device="
        return AbstractValue(Kind.TENSOR, device, self._factory_zero_dim(qualified, node), node, Source.FACTORY, how)

    def _host_data(self, expr: cst.BaseExpression, value: AbstractValue, state: State) -> bool:
        """Data for `torch.tensor(data)` that nothing shows to be a tensor: a local made by
        a call the analysis cannot see (`ids = tokenizer.encode(text)`), or a name the
        module body (a notebook) bound so, not a parameter (a tensor handed in keeps its
        device through `torch.tensor`)."""
        if value.kind is not Kind.UNKNOWN or value.device.known or value.maybe_accel or value.item:
            return False
        if type(expr) is cst.Name:
            if type(self.scope) is cst.Module:
                return expr.value in state.env and self._host_made(self.module_sources.get(expr.value))
            return expr.value in self.locals and expr.value not in self.params
        return type(expr) is cst.Call and type(expr.func) is cst.Attribute and self.qualified(expr.func) is None

    def _host_made(self, source: cst.BaseExpression | None) -> bool:
        """Was a module-level name bound by code that was given nothing on a device: no
        tensor that may be on one, no `device=` (`ids = tokenizer.encode(prompt).ids`, not
        `feats = model.encode_text(tokens)` nor `extract(images, device=device)`)?"""
        if source is None:
            return False
        for node in self.model.ctx.tree.walk(source):
            if type(node) is cst.Arg:
                if node.keyword is not None and node.keyword.value == "device":
                    return False
                value = self.result.values.get(id(node.value), UNKNOWN)
                if value.device.is_accel or value.maybe_accel or not (value.kind is Kind.OTHER or value.device.is_cpu):
                    return False
        return True

    def _factory_zero_dim(self, qualified: str, node: cst.Call) -> bool | None:
        """True for `torch.tensor(3.0)` and `torch.zeros(())`, False when the sizes show
        at least one dimension, None when the arguments do not say."""
        positional = [a for a in node.args if a.keyword is None]
        if qualified == "torch.scalar_tensor":
            return True
        if qualified in T.NONZERO_DIM_FACTORIES:
            return False
        if any(a.star for a in positional):
            return None
        if qualified in T.DATA_FACTORIES:
            if not positional:
                return None
            first = positional[0].value
            if type(first) is cst.UnaryOperation:
                first = first.expression
            if type(first) in (cst.Integer, cst.Float) or (
                type(first) is cst.Name and first.value in ("True", "False")
            ):
                return True
            if type(first) in (cst.List, cst.Tuple) and first.elements:
                return False
            if self.result.values.get(id(first)) == _PICTURE_ARRAY:
                return False
            return None
        size_arg = keyword_arg(node, "size")
        if size_arg is not None:
            sizes = [size_arg.value]
        elif qualified == "torch.randint":
            sizes = [a.value for a in positional if type(a.value) in (cst.Tuple, cst.List)][:1]
        elif qualified == "torch.full":
            sizes = [positional[0].value] if positional else []
        else:
            sizes = [a.value for a in positional]
        return self._sizes_zero_dim(sizes)

    def _sizes_zero_dim(self, sizes: list[cst.BaseExpression]) -> bool | None:
        """Is a tensor of these sizes (as a factory or `view` takes them) 0-dim? False for
        numbers (`3, n`, `-1`) or a non-empty tuple, True for `()`; `mu.shape` and
        `x.size()` give the rank of `mu`, of `x` (a module's input taken as having
        dimensions); None for anything else (a name may hold `()`)."""
        if not sizes:
            return None
        if len(sizes) > 1:
            return False
        size = sizes[0]
        if type(size) in (cst.Tuple, cst.List):
            return not size.elements
        if _is_int_expr(size) or _is_negative_one(size):
            return False
        # `torch.randn(mu.shape)`, `torch.zeros(x.size())`: the rank of `mu`, of `x`
        shaped = size.value if type(size) is cst.Attribute and size.attr.value == "shape" else None
        if (
            type(size) is cst.Call
            and type(size.func) is cst.Attribute
            and size.func.attr.value == "size"
            and not size.args
        ):
            shaped = size.func.value
        if shaped is not None:
            value = self.result.values.get(id(shaped), UNKNOWN)
            if value.zero_dim is None and value.is_tensor and value.source is Source.PARAMETER:
                return False  # `torch.randn(x.shape)` in `forward(self, x)`
            return value.zero_dim
        return None

    def _torch_op(self, qualified: str, node: cst.Call, args: list[AbstractValue]) -> AbstractValue:
        operands: list[Operand] = []
        for arg, value in zip(node.args, args):
            if arg.keyword is not None and arg.keyword.value == "out":
                continue
            inner = arg.value
            if type(inner) in (cst.List, cst.Tuple):
                for element in inner.elements:
                    operands.append(Operand(element.value, self.result.values.get(id(element.value), UNKNOWN)))
            elif type(inner) in (cst.ListComp, cst.GeneratorExp):
                operands.append(Operand(inner.elt, self.result.values.get(id(inner.elt), UNKNOWN)))
            elif (
                value.items is not None
                and None not in (value.items.mixed or (None,))
                and qualified.rsplit(".", 1)[-1] in T.JOINING_OPS
            ):
                # `torch.stack(losses)` of a list that got a CPU tensor on one iteration and
                # an accelerator tensor on another: stacking takes no 0-dim exemption
                cpu, other = value.items.mixed
                self._conflict(
                    Conflict(node, Operand(inner, replace(cpu, zero_dim=False)), Operand(inner, other), "joined")
                )
                return AbstractValue(Kind.TENSOR, other.device, False, other.origin, other.source, other.how)
            elif value.items is not None and value.items is not NO_ITEMS and value.items.tensor_like:
                # `torch.cat(outputs)`: the tensors appended to a list built empty here
                operands.append(Operand(inner, replace(value.items, kind=Kind.TENSOR, elements=None)))
            else:
                operands.append(Operand(inner, value))
        tensors = [o for o in operands if o.value.tensor_like or (o.value.maybe_accel and o.value.kind is Kind.UNKNOWN)]
        if qualified in T.SAME_DEVICE_FUNCTIONS:
            base = qualified.rsplit(".", 1)[-1]
            self._check_operands(node, tensors, elementwise=base in T.ELEMENTWISE_METHODS or base == "where")
        last = qualified.rsplit(".", 1)[-1]
        if not tensors:
            if last in T.JOINING_OPS and any(o.value.holds_accel for o in operands):
                # `torch.cat(features)`, a list that got an accelerator tensor appended
                return AbstractValue(Kind.TENSOR, zero_dim=False, maybe_accel=True)
            return UNKNOWN
        positional = positional_args(node)
        zero_dim = None
        if last in T.REDUCTIONS and len(positional) == 1 and keyword_arg(node, "dim") is None:
            zero_dim = True
        elif last in T.JOINING_OPS or last in T.ELEMENTWISE_METHODS:
            zero_dim = False if any(o.value.zero_dim is False for o in tensors) else None
        elif last in T.SHAPE_KEEPING and positional and positional[0].value is tensors[0].expr:
            zero_dim = tensors[0].value.zero_dim  # `torch.triu(torch.ones(n, n))` keeps its rank
        return self._result_on(tensors, zero_dim)

    def _result_on(self, tensors: list[Operand], zero_dim: bool | None) -> AbstractValue:
        """Where the result of an operation on `tensors` lives: with its known operands.
        When they disagree the operation fails; after the fix it runs on the accelerator,
        so that is where the result is taken to live."""
        known = [o.value for o in tensors if o.value.device.known]
        deciding = [v for v in known if v.device.is_accel] or known
        if not deciding:  # where none is known, with those that may be on the accelerator
            return AbstractValue(Kind.TENSOR, zero_dim=zero_dim, maybe_accel=any(o.value.maybe_accel for o in tensors))
        first = deciding[0]
        device = first.device
        for value in deciding[1:]:
            device = join_devices(device, value.device)
        same = all(v.origin is first.origin for v in deciding)
        origin = first.origin if same else None
        return AbstractValue(Kind.TENSOR, device, zero_dim, origin, first.source if same else Source.NONE,
                             first.how if same else "")  # fmt: skip

    # -- methods -----------------------------------------------------------------------

    def _opens_a_picture(self, expr: cst.BaseExpression) -> bool:
        """Is `expr` a picture PIL opened (`Image.open(p)`, and its `.convert(...)`s)?"""
        while type(expr) is cst.Call:
            if self.qualified(expr.func) == "PIL.Image.open":
                return True
            if type(expr.func) is not cst.Attribute or expr.func.attr.value not in _PICTURE_METHODS:
                return False  # `.getpixel(...)` is one pixel
            expr = expr.func.value
        return False

    def _method_call(self, node: cst.Call, name: str, receiver: AbstractValue, receiver_expr,
                     args: list[AbstractValue], state: State) -> AbstractValue:  # fmt: skip
        if receiver == _PICTURE_ARRAY and name in ("copy", "astype"):
            return receiver
        if receiver == HOST_ARRAY:
            return HOST_ARRAY  # `np.frombuffer(b).reshape(h, w, 3)`: still host data
        if receiver.transform == DISTRIBUTION:
            return self._sampled(node, name, receiver)
        if name in T.TRACING_METHODS:
            return self._traced(node, args)
        receiver = self._module_if_evident(receiver, receiver_expr)
        if receiver.kind is Kind.BATCH and dotted_name(receiver_expr) is not None:
            # a batch may be a mapping that moves in place (`BatchEncoding.to` returns itself)
            # or changes its entries (`batch.update(...)`): after that, it is where the code put it
            if name in T.MOVE_METHODS:
                moved = self._move(node, name, receiver, receiver_expr, state)
                self.bind(receiver_expr, moved, state)
                return moved
            if name in ("update", "setdefault", "__setitem__"):
                self.bind(receiver_expr, UNKNOWN, state)
        if name in T.MOVE_METHODS:
            return self._move(node, name, receiver, receiver_expr, state)
        if name == "backward" and receiver.tensor_like:
            # `out.backward(gradient=seed)`: the seed must be where the output is (a 0-dim
            # CPU seed is moved by autograd)
            seed = keyword_arg(node, "gradient") or next(iter(positional_args(node)), None)
            if seed is not None:
                value = self.result.values.get(id(seed.value), UNKNOWN)
                if value.tensor_like:
                    operands = [Operand(receiver_expr, receiver), Operand(seed.value, value)]
                    self._check_operands(node, operands, elementwise=True)
            return OTHER
        if name in T.MODEL_INPUT_METHODS and receiver.is_module and receiver.holds_params and receiver.device.known:
            # `model.generate(ids)`: the model runs on the ids it is given
            self._module_call(node, receiver, args)
            return UNKNOWN
        if _host_tensors(node) and not receiver.instance_of:  # not a method of the file's own class
            return self._host_output(node, name)
        kind = receiver.kind
        if receiver.items is not None and type(receiver_expr) is cst.Name:
            # a list built empty here: `outputs.append(out)` adds to what it holds
            if name == "append" and len(args) == 1:
                receiver = replace(receiver, items=join_items(receiver.items, args[0]))
            else:
                receiver = replace(receiver, items=None)
            self.bind(receiver_expr, receiver, state)
        if name in ("append", "extend", "insert") and kind in (Kind.OTHER, Kind.UNKNOWN) and not receiver.device.known:
            # `losses.append(loss)`: the list now holds an accelerator tensor
            if any(v.may_be_accel_tensor or v.holds_accel for v in args):
                if dotted_name(receiver_expr) is not None:
                    self.bind(receiver_expr, replace(receiver, holds_accel=True), state)
                elif type(receiver_expr) is cst.Subscript and dotted_name(receiver_expr.value) is not None:
                    # `history[phase].append(err)`: the dict of lists holds it
                    outer = self.result.values.get(id(receiver_expr.value), UNKNOWN)
                    if outer.kind in (Kind.OTHER, Kind.UNKNOWN) and not outer.device.known:
                        self.bind(receiver_expr.value, replace(outer, holds_accel=True), state)
            return OTHER
        if name == "type" and kind is Kind.UNKNOWN and node.args and not receiver.device.known:
            if self._legacy_type_device(node.args[0].value) is not None:
                # a tensor, or a module (whose parameters go there too): the device, not the kind
                converted = self._tensor_method(node, name, receiver, receiver_expr, args)
                return replace(converted, kind=Kind.UNKNOWN)
        if kind is Kind.TENSOR or (
            kind is Kind.UNKNOWN
            and ((receiver.device.known or receiver.maybe_accel) and name in T.TENSOR_METHODS
                 or name in T.TENSOR_ONLY_METHODS)
        ):  # fmt: skip
            # a moved value, or a module's output, that is used like a tensor is one
            return self._tensor_method(node, name, replace(receiver, kind=Kind.TENSOR), receiver_expr, args)
        if kind is Kind.MODULE:
            if name in T.MODULE_SELF_METHODS:
                return receiver
            if name == "forward":
                return self._module_call(node, receiver, args)
            # `model.features(x)`: a submodule or method computes where its inputs are
            inputs = [v for a, v in zip(node.args, args) if a.keyword is None and v.tensor_like and v.device.is_accel]
            if inputs and not receiver.device.is_cpu:
                first = inputs[0]
                return AbstractValue(Kind.UNKNOWN, first.device, None, first.origin, first.source, first.how)
            return UNKNOWN
        if kind is Kind.BATCH and name in ("float", "long", "half", "double", "int", "bool"):
            return replace(receiver, kind=Kind.TENSOR)
        if kind is Kind.DATALOADER and name == "__iter__":
            return receiver
        if name in ("numpy", "item", "tolist"):
            return OTHER
        return UNKNOWN

    def _move(self, node: cst.Call, name: str, receiver: AbstractValue, receiver_expr, state: State) -> AbstractValue:
        code = self.model.ctx.module.code_for_node
        if name == "cpu":
            target: Device | None = CPU
        elif name == "to":
            target = self._to_target(node, receiver, state)
        elif name == "to_empty":
            device_arg = move_target(node)
            target = self.device_at(device_arg.value, state) if device_arg is not None else UNKNOWN_DEVICE
        else:
            positional = positional_args(node)
            index = code(positional[0].value) if positional else None
            device_arg = keyword_arg(node, "device")
            if device_arg is not None:
                target = self.device_at(device_arg.value, state)
            else:
                target = accel(f'"{name}:{index}"' if index is not None else f'"{name}"')
        how = f".{name}({', '.join(code(a) for a in node.args)})".replace("\n", " ")
        if receiver.kind is Kind.OTHER or receiver.kind is Kind.DEVICE:
            return UNKNOWN
        if target is None:  # a dtype or memory-format conversion: stays where it is
            return receiver
        moved = receiver.on(target, node, Source.MOVE, how)
        if receiver.kind is Kind.MODULE:  # Module.to / .cuda / .cpu move in place
            owner, held, placed = _module_itself(receiver_expr), receiver, moved
            if type(owner) is cst.Call and self.qualified(owner.func) in T.MODULE_WRAPPERS and owner.args:
                # `nn.DataParallel(self.model).cuda()`: the wrapper moves the module it holds
                first = owner.args[0]
                owner = first.value if first.keyword is None and not first.star else owner
                held = self.result.values.get(id(owner), UNKNOWN)
                placed = held.on(target, node, Source.MOVE, how)
            if dotted_name(owner) is not None and held.is_module:
                self.bind(owner, placed, state)
                self.moved_in_place(owner, placed)
                self.move_aliases(dotted_name(owner), held, placed, state)
        if not target.known:
            moved = replace(moved, origin=None, source=Source.NONE, how="")
        return moved

    def _to_target(self, node: cst.Call, receiver: AbstractValue, state: State) -> Device | None:
        """The device `.to(...)` moves to; None when it is no device move at all."""
        device_arg = keyword_arg(node, "device")
        if device_arg is not None:
            return self.device_at(device_arg.value, state)
        positional = positional_args(node)
        if not positional:
            if any(a.keyword is not None and a.keyword.value == "other" for a in node.args):
                return UNKNOWN_DEVICE
            return None
        first = positional[0].value
        value = self.result.values.get(id(first), UNKNOWN)
        if value.tensor_like:
            return value.device  # `.to(other)`: other's device (and dtype)
        if value.kind is Kind.DEVICE or (value.kind is Kind.OTHER and value.device.known):
            return value.device
        qualified = self.qualified(first)
        dotted = dotted_name(first) or ""
        if qualified in T.DTYPES or dotted.endswith("dtype") or qualified == "torch.channels_last":
            return None
        if type(first) is cst.Integer:
            return accel(first.value)
        last = dotted.rsplit(".", 1)[-1]
        if dotted and ("device" in last.lower() or last in T.DEVICE_LIKE_NAMES) and "cpu" not in last.lower():
            return accel(dotted)
        return UNKNOWN_DEVICE

    def _legacy_type_device(self, expr: cst.BaseExpression) -> Device | None:
        """Where `.type(<expr>)` copies a tensor: the CPU for `torch.FloatTensor`, CUDA for
        `torch.cuda.FloatTensor`; None for anything else (a dtype, `torch.Tensor`)."""
        qualified = self.qualified(expr) or ""
        if qualified in T.LEGACY_CPU_TYPES and qualified != "torch.Tensor":
            return CPU
        if qualified in T.LEGACY_CUDA_TYPES:
            return accel('"cuda"')
        return None

    def _tensor_method(self, node: cst.Call, name: str, receiver: AbstractValue, receiver_expr,
                       args: list[AbstractValue]) -> AbstractValue:  # fmt: skip
        if name in T.NON_TENSOR_METHODS:
            if name == "type" and node.args:
                device = self._legacy_type_device(node.args[0].value)
                if device is not None:
                    short = f".type({code_of_name(node.args[0].value, self.model.ctx.module)})"
                    return AbstractValue(Kind.TENSOR, device, receiver.zero_dim, node, Source.FACTORY, short)
                if self.qualified(node.args[0].value) in T.DTYPES and receiver.tensor_like:
                    return replace(receiver, kind=Kind.TENSOR, is_parameter=False)  # `.type(torch.float32)`: a cast
                return AbstractValue(Kind.TENSOR)
            return OTHER
        if name == "type_as":
            other = args[0] if args else UNKNOWN
            if other.device.known and receiver.device.known and other.device != receiver.device:
                # `labels.to(device).type_as(reals)` of a CPU `reals`: moved back to the CPU here
                how = f".type_as({code_of_name(node.args[0].value, self.model.ctx.module)})"
                return replace(receiver, device=other.device, origin=node, source=Source.MOVE, how=how)
            return replace(receiver, device=other.device, origin=other.origin, source=other.source, how=other.how)
        if name.startswith("new_"):
            device_arg = keyword_arg(node, "device")
            if device_arg is not None:
                return AbstractValue(Kind.TENSOR, self.result.values.get(id(device_arg.value), UNKNOWN).device)
            return replace(receiver, zero_dim=None, is_parameter=False)
        if name not in T.TENSOR_METHODS:
            return UNKNOWN
        tensors = [
            Operand(a.value, v) for a, v in zip(node.args, args)
            if v.tensor_like and not (a.keyword is not None and a.keyword.value == "out")
        ]  # fmt: skip
        me = Operand(receiver_expr, receiver)
        if name in T.ELEMENTWISE_METHODS or name in T.SAME_DEVICE_METHODS:
            if name.endswith("_"):
                self._check_inplace(node, me, tensors)
                return replace(receiver, is_parameter=False)
            self._check_operands(node, [me, *tensors], elementwise=name in T.ELEMENTWISE_METHODS)
            zero_dim = receiver.zero_dim if receiver.zero_dim is False else None
            return self._result_on([me, *tensors], zero_dim)
        positional = positional_args(node)
        if name in T.REDUCTIONS and not positional and keyword_arg(node, "dim") is None:
            return replace(receiver, zero_dim=True, is_parameter=False)
        if name in T.SHAPE_KEEPING:
            return replace(receiver, is_parameter=False)
        if name in T.AT_LEAST_ONE_DIM:
            return replace(receiver, zero_dim=False, is_parameter=False)
        if name in T.SIZED_VIEWS and positional and not any(a.star for a in node.args):
            zero_dim = self._sizes_zero_dim([a.value for a in positional])
            return replace(receiver, zero_dim=zero_dim, is_parameter=False)
        return replace(receiver, zero_dim=None, is_parameter=False)

    # -- device expressions ------------------------------------------------------------

    def device_at(self, expr: cst.BaseExpression, state: State) -> Device:
        """The device a `device=` argument names (already evaluated): a symbolic
        accelerator unless it is known to be the CPU."""
        if type(expr) is cst.Name and expr.value == "None":
            return state.default
        value = self.result.values.get(id(expr))
        if value is None:
            value = self.eval(expr, state)
        if value.kind in (Kind.DEVICE, Kind.OTHER) and value.device.known:
            return value.device
        if type(expr) in (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString):
            return UNKNOWN_DEVICE  # "meta" and friends
        if value.kind in (Kind.TENSOR, Kind.MODULE):
            return UNKNOWN_DEVICE
        return accel(self.model.ctx.module.code_for_node(expr))

    def _device_call(self, node: cst.Call, state: State) -> Device:
        positional = positional_args(node)
        if not positional:
            type_arg = keyword_arg(node, "type")
            return self.device_at(type_arg.value, state) if type_arg is not None else UNKNOWN_DEVICE
        device = self.device_at(positional[0].value, state)
        if device.is_accel and len(positional) > 1:
            return accel(self.model.ctx.module.code_for_node(node))
        return device

    # -- conflicts ---------------------------------------------------------------------

    def _binary_result(self, node, left: Operand, right: Operand, *, comparison: bool = False) -> AbstractValue:
        tensors = [o for o in (left, right) if o.value.tensor_like]
        if not tensors:
            if left.value.kind is Kind.OTHER and right.value.kind is Kind.OTHER:
                return OTHER
            if left.value.maybe_accel or right.value.maybe_accel:
                return AbstractValue(maybe_accel=True)  # `100.0 * total_error`
            return UNKNOWN
        matmul = type(getattr(node, "operator", None)) is cst.MatrixMultiply
        self._check_operands(node, tensors, elementwise=not matmul)
        zero_dim = None
        if all(o.value.zero_dim is True for o in tensors):
            zero_dim = True
        elif any(o.value.zero_dim is False for o in tensors):
            zero_dim = False
        if type(getattr(node, "operator", None)) is cst.MatrixMultiply:
            zero_dim = None
        return self._result_on(tensors, zero_dim)

    def _check_operands(self, node: cst.CSTNode, operands: list[Operand], *, elementwise: bool = True) -> None:
        """Inputs of one operation: CPU against an accelerator fails, unless the CPU one
        is a 0-dim tensor of an elementwise operation (PyTorch lets CPU scalars into
        accelerator kernels). A CPU operand of unknown rank is left alone there."""
        accelerated = [o for o in operands if o.value.device.is_accel]
        if not accelerated:
            return
        named = [o for o in accelerated if dotted_name(o.expr) is not None] or accelerated
        for operand in operands:
            value = operand.value
            rank_matters = value.zero_dim is not False if elementwise else value.zero_dim is True
            if value.device.is_cpu and not rank_matters:
                if value.source is Source.CONSTRUCTION and all(o.value.source is Source.PARAMETER for o in accelerated):
                    return  # a CPU model's output beside a parameter's own `x.device`: no accelerator in sight
                self._conflict(Conflict(node, operand, named[0]))
                return

    def _check_maybe_operands(self, node: cst.CSTNode, operands: list[Operand]) -> None:
        """`loss_fn(model(x), labels)` with a model moved on some paths only (`if num_gpus
        == 1: model.to("cuda")`): its output may be on the accelerator, and labels the
        tokenizer, a loader or a factory made on the CPU fail there. Not under an `if` on
        a device choice (the labels may well follow the same choice)."""
        if self._under_device_choice():
            return
        maybe = [o for o in operands if o.value.maybe_accel and not o.value.device.known]
        if not maybe or any(o.value.device.is_accel for o in operands):
            return
        for operand in operands:
            if _unmoved_host_tensor(operand):
                other = Operand(maybe[0].expr, replace(maybe[0].value, device=accel(None), maybe_accel=True))
                self._conflict(Conflict(node, operand, other))
                return

    def _check_module_inputs(self, node: cst.CSTNode, module_side: Operand, inputs: list[Operand]) -> None:
        """A model on a known device given tensors: the first not where it is (a 0-dim one
        excepted) fails the call."""
        device = module_side.value.device
        for operand in inputs:
            if operand.value.zero_dim is not True and disagree(device, operand.value.device):
                cpu, other = (module_side, operand) if device.is_cpu else (operand, module_side)
                self._conflict(Conflict(node, cpu, other, "module"))
                return

    def _under_device_choice(self) -> bool:
        """Is the walk under an `if` on a device choice (`if not args.cuda:`)? A model moved
        on some paths may well be where a tensor is there: the same choice as the move's."""
        return any(_names_a_device_choice(self.model.ctx.tree, test) for test in self.tests)

    def _check_inplace(self, node: cst.CSTNode, output: Operand, inputs: list[Operand]) -> None:
        """`out op= x`: the output's device decides; a CPU output takes no accelerator
        input, even a 0-dim one."""
        if output.value.device.is_cpu:
            for operand in inputs:
                if operand.value.device.is_accel and operand.value.tensor_like:
                    self._conflict(Conflict(node, output, operand, "inplace"))
                    return
        elif output.value.device.is_accel:
            for operand in inputs:
                if operand.value.device.is_cpu and operand.value.zero_dim is False:
                    self._conflict(Conflict(node, operand, output))
                    return

    def _conflict(self, conflict: Conflict) -> None:
        if not self.phase1:
            self.result.conflicts.setdefault(id(conflict.node), conflict)

    def _snapshot(self, node: cst.CSTNode, state: State) -> None:
        if not self.phase1 and id(node) not in self.result.snapshots:
            self.result.snapshots[id(node)] = (self.params, state.mark())


_ARRAYS = frozenset({"numpy.array", "numpy.asarray"})
# PIL Image methods that give a picture again.
_PICTURE_METHODS = frozenset({"convert", "resize", "crop", "rotate", "transpose", "copy", "filter", "reduce"})
# A NumPy array of a picture: host data with rows and columns, never 0-dim.
_PICTURE_ARRAY = replace(OTHER, zero_dim=False)

_READING_BUILTINS = frozenset(
    {"len", "print", "sum", "min", "max", "any", "all", "zip", "enumerate", "iter", "list", "tuple",
     "sorted", "reversed", "map", "filter", "isinstance", "str", "repr"}
)  # fmt: skip


def _where_placed(value: AbstractValue) -> AbstractValue:
    """What a self-placing model's `forward` returns, as its caller sees it: a tensor it did
    not put on the CPU may be on the accelerator; a CPU tensor, an array, a number stay."""
    if value.device.is_cpu or value.kind not in (Kind.TENSOR, Kind.UNKNOWN) or value.elements is not None:
        return value
    return AbstractValue(value.kind, maybe_accel=True)


def _constant(expr: cst.BaseExpression, value: AbstractValue) -> AbstractValue:
    """An argument as a call passes it: the `None`, `True` or `False` it writes, else its value."""
    return CONSTANTS.get(expr.value, value) if type(expr) is cst.Name else value


def _maybe_somewhere(value: AbstractValue) -> bool:
    """May `value`, or an item of it, be on the accelerator (and no more is known)?"""
    return value.maybe_accel or (value.elements is not None and any(e.maybe_accel for e in value.elements))


def _constant_defaults(function: cst.FunctionDef) -> dict[str, AbstractValue]:
    """The parameters of `function` that default to `None`, `True` or `False`, with it."""
    params = function.params
    return {
        p.name.value: CONSTANTS[p.default.value]
        for p in (*params.posonly_params, *params.params, *params.kwonly_params)
        if type(p.default) is cst.Name and p.default.value in CONSTANTS
    }


def _unmoved_host_tensor(operand: Operand) -> bool:
    """A tensor a loader, the host (NumPy, a tokenizer) or a factory made on the CPU, not
    0-dim and no sequence lengths (which go in on the CPU): what fails where a model moved
    on some paths only is on the accelerator."""
    value = operand.value
    return (
        value.device.is_cpu
        and value.zero_dim is not True
        and value.source in (Source.LOADER, Source.NUMPY, Source.FACTORY)
        and not _names_lengths(operand.expr)
    )


def _legacy_rank(node: cst.Call) -> bool | None:
    """Is `torch.FloatTensor(...)` 0-dim? Not with sizes (`FloatTensor(1, n)`), none
    (an empty 1-dim tensor) or a list of data; anything else may be."""
    positional = [a.value for a in node.args if a.keyword is None and not a.star]
    if len(positional) != len(node.args):
        return None
    if not positional or len(positional) > 1 or type(positional[0]) in (cst.List, cst.Integer):
        return False
    return None


def _kind_only(value: AbstractValue) -> AbstractValue:
    """What kind of value `value` is (a tensor, a tuple of them), on an unknown device."""
    elements = tuple(_kind_only(item) for item in value.elements) if value.elements is not None else None
    if value.kind in (Kind.TENSOR, Kind.MODULE, Kind.OTHER) or elements is not None:
        return AbstractValue(value.kind, elements=elements)
    return UNKNOWN


def _registry_model(func: cst.BaseExpression) -> bool:
    """`models.__dict__[name]`, `torchvision.models.__dict__[name]`: a model architecture
    looked up by name."""
    if type(func) is not cst.Subscript:
        return False
    owner = dotted_name(func.value) or ""
    return owner.endswith("models.__dict__")


def _names_a_device_choice(tree, test: cst.BaseExpression) -> bool:
    """Does an `if` test read a name of a device choice (`args.cuda`, `use_gpu`,
    `n_gpu > 1`, `device.type == "cpu"`)?"""
    for node in tree.walk(test):
        name = node.value if type(node) is cst.Name else node.attr.value if type(node) is cst.Attribute else ""
        if any(part in name.lower() for part in ("cuda", "gpu", "device", "accel", "mps", "cpu")):
            return True
    return False


def _names_lengths(expr: cst.BaseExpression) -> bool:
    """`lengths`, `src_len`, `batch["length"]`, `text_lengths.long()`, `input_sizes`:
    sequence lengths, which RNN packing wants on the CPU."""
    while type(expr) is cst.Call and type(expr.func) is cst.Attribute:
        expr = expr.func.value
    if type(expr) is cst.Subscript and len(expr.slice) == 1 and type(expr.slice[0].slice) is cst.Index:
        key = string_value(expr.slice[0].slice.value)
        if key is not None:
            return _length_word(key)
    name = dotted_name(expr)
    return name is not None and _length_word(name.rsplit(".", 1)[-1])


def _length_word(name: str) -> bool:
    name = name.lower()
    return "len" in name or name.endswith("sizes")


def _module_itself(expr: cst.BaseExpression) -> cst.BaseExpression:
    """`model` of `model.eval()` or `model.cuda().half()`: the methods a module returns
    itself from, peeled off."""
    while (
        type(expr) is cst.Call
        and type(expr.func) is cst.Attribute
        and (expr.func.attr.value in T.MODULE_SELF_METHODS or expr.func.attr.value in T.MOVE_METHODS)
    ):
        expr = expr.func.value
    return expr


def is_true_arg(arg: cst.Arg | None) -> bool:
    return arg is not None and not (type(arg.value) is cst.Name and arg.value.value in ("False", "None"))


def _is_negative_one(expr: cst.BaseExpression) -> bool:
    """`-1`, the size `view` and `expand` infer or keep."""
    return (
        type(expr) is cst.UnaryOperation and type(expr.operator) is cst.Minus and type(expr.expression) is cst.Integer
    )


def _is_int_expr(expr: cst.BaseExpression) -> bool:
    """`3`, `x.size(0)`, `x.shape[1]`, `len(xs)`, `int(n)` and arithmetic on them."""
    if type(expr) is cst.Integer:
        return True
    if type(expr) is cst.BinaryOperation:
        return _is_int_expr(expr.left) and _is_int_expr(expr.right)
    if type(expr) is cst.Subscript and type(expr.value) is cst.Attribute:
        return expr.value.attr.value == "shape" and len(expr.slice) == 1 and type(expr.slice[0].slice) is cst.Index
    if type(expr) is cst.Call:
        if type(expr.func) is cst.Name:
            return expr.func.value in ("len", "int")
        if type(expr.func) is cst.Attribute:
            return expr.func.attr.value in ("size", "numel", "dim") and bool(expr.args)
    return False


def _host_tensors(node: cst.Call) -> bool:
    """A library call asked for PyTorch tensors of its output (`return_tensors="pt"`, as
    Hugging Face tokenizers and processors take): they are made in host memory."""
    arg = keyword_arg(node, "return_tensors")
    return arg is not None and type(arg.value) is cst.SimpleString and arg.value.value[1:-1] == "pt"
