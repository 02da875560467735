"""The rule protocol: a rule visits node types, asks the analysis, and reports.

A rule is a class with a ruff-style docstring and `visit_<NodeType>` methods. The engine
walks each file once and calls, for every node, the `visit_` methods of every selected
rule for that node's type. Rules register themselves by subclassing `Rule`.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import libcst as cst

from devlint.codes import is_default
from devlint.fix.plan import FixPlan

if TYPE_CHECKING:
    from devlint.analysis.context import FileContext
    from devlint.fix.binding import BindingService

REGISTRY: dict[str, type[Rule]] = {}


@dataclass(frozen=True)
class Report:
    code: str
    node: cst.CSTNode
    message: str
    fix: FixPlan | None
    top: cst.CSTNode | None = None  # the top-level statement holding `node`


_HEADING = re.compile(r"^## (.+)$", re.MULTILINE)


class Rule:
    """Base class. Subclasses set `code`, `name`, and write the docstring in ruff's manner:

    ## What it does / ## Why is this bad? / ## Example / ## Use instead / ## Fix safety
    """

    code: ClassVar[str]
    name: ClassVar[str]
    fixable: ClassVar[bool] = False
    default: ClassVar[bool] = True  # set from the rule's family (devlint.codes): False when opt-in

    def __init__(self, ctx: FileContext, binding: BindingService, reports: list[Report]) -> None:
        self.ctx = ctx
        self.binding = binding
        self._reports = reports

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if "code" in cls.__dict__:
            cls.default = is_default(cls.code)
            if cls.code in REGISTRY:
                raise ValueError(f"duplicate rule code {cls.code}")
            REGISTRY[cls.code] = cls

    def report(self, node: cst.CSTNode, message: str, fix: FixPlan | None = None) -> None:
        self._reports.append(Report(self.code, node, message, fix, self.ctx.top_level_statement()))

    def source_of(self, node: cst.CSTNode) -> str:
        """The code of `node` as written, without the parentheses around it."""
        if getattr(node, "lpar", None):
            node = node.with_changes(lpar=(), rpar=())
        return self.ctx.module.code_for_node(node)

    # -- documentation ---------------------------------------------------------------

    @classmethod
    def doc(cls) -> str:
        return inspect.cleandoc(cls.__doc__ or "")

    @classmethod
    def section(cls, heading: str) -> str:
        """The text under `## heading` in the docstring."""
        doc = cls.doc()
        parts = _HEADING.split(doc)
        for title, body in zip(parts[1::2], parts[2::2]):
            if title.strip().rstrip("?").lower() == heading.rstrip("?").lower():
                return body.strip()
        return ""

    @classmethod
    def summary(cls) -> str:
        """The first paragraph of "What it does", on one line."""
        first = cls.section("What it does").split("\n\n", 1)[0]
        return " ".join(first.split())


def visitors(rule: Rule) -> dict[type, object]:
    """`{cst.Call: rule.visit_Call, ...}` for the node types the rule visits."""
    return {node_type: getattr(rule, attr) for node_type, attr in _visitor_names(type(rule)).items()}


_VISITOR_NAMES: dict[type, dict[type, str]] = {}


def _visitor_names(rule_type: type[Rule]) -> dict[type, str]:
    table = _VISITOR_NAMES.get(rule_type)
    if table is None:
        table = {}
        for attr in dir(rule_type):
            if attr.startswith("visit_"):
                node_type = getattr(cst, attr[len("visit_") :], None)
                if node_type is None:
                    raise TypeError(f"{rule_type.__name__}.{attr}: no libcst node {attr[6:]}")
                table[node_type] = attr
        _VISITOR_NAMES[rule_type] = table
    return table
