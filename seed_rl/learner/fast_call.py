"""Calling one compiled TF function thousands of times per second from Python, with less Python per call.

The learner's inference step (``seed_rl/learner/inference.py``) is one concrete function with a fixed signature,
called with tensors that already have the right specs. This module owns the private TensorFlow entry points that
call such a function more cheaply, and the capability checks that say where each applies:

* ``flat_caller``: calls the function's graph through the concrete function's internal flat entry point
  (``_inference_function.call_flat``), skipping the public call's Python argument binding; the public call where
  this TensorFlow lacks that entry point (``has_flat_entry_point``).
* ``packer``: the inverse of ``tf.nest.flatten`` for one structure, built once.
* ``executor_refusal`` and ``choose_executor``: whether the function runs under TensorFlow's
  ``SINGLE_THREADED_EXECUTOR`` (its ops run one after the other in the calling thread), decided from the traced
  graph before the first call.
* ``FastCaller``: the three together, as ``InferenceStep(fast_call=True)`` uses them.

Nothing here changes what a function computes: the same graph runs, only the Python around the call and the
executor that schedules its ops differ (``tests/learner/test_fast_call.py`` compares both paths). Why these paths
exist, with the measurements: ``benchmarks/RESULTS.md``, section "Why the fast paths exist".
"""

from __future__ import annotations

import functools
from typing import Any, Callable, ContextManager, NamedTuple, Optional, Sequence

import tensorflow as tf

__all__ = [
    "DEFAULT_EXECUTOR",
    "SINGLE_THREADED_EXECUTOR",
    "ExecutorChoice",
    "FastCaller",
    "choose_executor",
    "executor_refusal",
    "flat_caller",
    "has_flat_entry_point",
    "packer",
]

SINGLE_THREADED_EXECUTOR = "SINGLE_THREADED_EXECUTOR"
"""TensorFlow's executor that runs a function's ops one by one in the calling thread."""
DEFAULT_EXECUTOR = "DEFAULT"
"""TensorFlow's default executor, which hands a function's ready ops to its inter-op thread pool."""

# Node::IsControlFlow (tensorflow/core/graph/graph.h and the node classes of graph.cc): the v1 control-flow ops,
# which TensorFlow's single-threaded executor refuses (ValidateOpIsSafeForSyncExecution in
# tensorflow/core/common_runtime/single_threaded_executor.cc; checked against TF 2.21, and older 2.x sources show
# the same checks). It also refuses nodes with reference-typed outputs, which executor_refusal checks too.
_LOW_LEVEL_CONTROL_FLOW = frozenset({
    "Switch", "RefSwitch", "_SwitchN", "Ref_SwitchN", "Merge", "RefMerge", "_XlaMerge", "Enter", "RefEnter",
    "Exit", "RefExit", "NextIteration", "RefNextIteration",
})
# The functional control-flow ops that LowerFunctionalOpsPass (tensorflow/core/common_runtime/
# lower_functional_ops.cc) rewrites into the ops above when a function is instantiated, if the op carries this
# attribute. tf.cond, tf.while_loop, tf.scan (an LSTM unroll) and tf.switch_case set it at trace time, unless they
# are traced inside an XLA context or under the single-threaded executor (control_flow_util_v2.py
# maybe_set_lowering_attr).
_FUNCTIONAL_CONTROL_FLOW = frozenset({"If", "StatelessIf", "While", "StatelessWhile", "Case", "StatelessCase"})
_LOWERING_ATTR = "_lower_using_switch_merge"


class ExecutorChoice(NamedTuple):
    """The executor a function is called under, and why."""

    name: str
    """``SINGLE_THREADED_EXECUTOR`` or ``DEFAULT_EXECUTOR``."""
    reason: str
    """Why, in words (for logs and tests)."""


def has_flat_entry_point(concrete: Any) -> bool:
    """Whether ``flat_caller`` can call ``concrete``'s graph directly (else it uses the public call).

    True when this TensorFlow has the internal entry point (the concrete function's ``_inference_function`` with a
    callable ``call_flat``, TF >= 2.15) and every output is a tensor (``call_flat`` returns no ``None`` leaves).
    """
    atomic = getattr(concrete, "_inference_function", None)
    if atomic is None or not callable(getattr(atomic, "call_flat", None)):
        return False
    return not any(leaf is None for leaf in tf.nest.flatten(concrete.structured_outputs, expand_composites=True))


def flat_caller(concrete: Any) -> Callable[[Sequence[Any]], Any]:
    """``call(flat_tensors) -> structured outputs`` for a concrete function with a fixed signature.

    ``flat_tensors`` are the tensors of ``concrete.structured_input_signature[0]`` in ``tf.nest.flatten`` order,
    already of the right dtypes and shapes: the direct call checks nothing (the public call binds its arguments to
    the signature, flattening and checking them in Python on every call). The outputs have the structure of
    ``concrete.structured_outputs`` with the plain containers (see ``packer``). Where ``has_flat_entry_point`` is
    false, this is the public call on the arguments packed back into the signature's structure.
    """
    if not has_flat_entry_point(concrete):
        signature = concrete.structured_input_signature[0]
        return lambda flat: concrete(*tf.nest.pack_sequence_as(signature, list(flat)))

    atomic = concrete._inference_function
    num_outputs = len(tf.nest.flatten(concrete.structured_outputs, expand_composites=True))
    captured = list(concrete.captured_inputs)
    pack = packer(concrete.structured_outputs)

    def call(flat):
        outputs = atomic.call_flat(*flat, *captured)
        if len(outputs) != num_outputs:  # the function has run (and had its effects): it cannot be retried
            raise RuntimeError(
                f"seed_rl: TensorFlow {tf.__version__} returned {len(outputs)} outputs for a function with "
                f"{num_outputs}; its internal call convention changed (seed_rl/learner/fast_call.py flat_caller); "
                f"run with fast_inference_call off")
        return pack(outputs)

    return call


def packer(structure: Any) -> Callable[[Sequence[Any]], Any]:
    """A function ``flat list -> structure``, the inverse of ``tf.nest.flatten``, built once for ``structure``.

    ``tf.nest.pack_sequence_as`` walks the structure again on every call. The packer handles namedtuples, tuples,
    lists, dicts (in ``tf.nest``'s sorted-key order) and leaves, and falls back to ``tf.nest.pack_sequence_as``
    (with ``expand_composites=True``) for anything else. TensorFlow's tracking wraps tuples and lists that a Keras
    layer returns (e.g. an LSTM state); the packer returns the plain container.
    """
    position = [0]

    def build(node):
        node = getattr(node, "__wrapped__", node)
        if isinstance(node, tuple) and hasattr(node, "_fields"):
            parts = [build(x) for x in node]
            cls = type(node)
            return lambda flat: cls(*[part(flat) for part in parts])
        if type(node) in (tuple, list):
            parts = [build(x) for x in node]
            cls = type(node)
            return lambda flat: cls([part(flat) for part in parts])
        if type(node) is dict:
            keys = sorted(node)  # tf.nest's order
            parts = [build(node[k]) for k in keys]
            return lambda flat: dict(zip(keys, (part(flat) for part in parts)))
        if tf.nest.is_nested(node):
            raise TypeError(type(node))
        i = position[0]
        position[0] += 1
        return lambda flat: flat[i]

    def slow(flat):
        return tf.nest.pack_sequence_as(structure, flat, expand_composites=True)

    try:
        fast = build(structure)
    except TypeError:
        return slow
    return fast if position[0] == len(tf.nest.flatten(structure, expand_composites=True)) else slow


def executor_refusal(concrete: Any) -> Optional[str]:
    """Why TensorFlow's single-threaded executor would refuse to run ``concrete``, or None if it runs it.

    The executor validates every node of a graph when it is created for it, and refuses nodes with reference-typed
    outputs and v1 control flow (Switch, Merge, Enter, Exit, NextIteration). A TF2 trace has v1 control flow
    after instantiation wherever a functional If / While / Case is marked for lowering (tf.cond, tf.while_loop and
    tf.scan, e.g. an LSTM unrolled with tf.scan, mark theirs): LowerFunctionalOpsPass rewrites it into those ops
    and inlines its branches or body. A functional op that is not lowered calls its branch or body functions when
    it executes, and they run under the caller's executor too, so every function of the graph's library (nested
    tf.functions, branches, loop bodies) is checked as well as the graph itself. That is also why this is decided
    before the first call rather than from an error: the executor refuses such a nested function only when the op
    that calls it runs, after other ops of the call (e.g. the inference step's table writes) may have run, and the
    call could then not be retried.

    The check reads the traced graph and its library, before TensorFlow's instantiation passes, and mirrors the
    executor's checks as of TF 2.21. It errs on one side only: TensorFlow does not lower ops inside XLA or TPU
    clusters, which this check does not model, so such a graph is reported refused and only loses the faster
    executor. There is no fallback on an error for the other side, since a retry after a refusal at run time
    would repeat the ops that had already run.
    """
    from tensorflow.python.framework import op_def_registry  # the registry of op definitions, for ref outputs

    graph_def = concrete.graph.as_graph_def()
    bodies = [("the graph", graph_def.node)]
    bodies += [(f"library function {f.signature.name}", f.node_def) for f in graph_def.library.function]
    for where, nodes in bodies:
        for node in nodes:
            if node.op in _LOW_LEVEL_CONTROL_FLOW:
                return f"{where} has low-level control flow ({node.op} node {node.name!r})"
            if node.op in _FUNCTIONAL_CONTROL_FLOW and _LOWERING_ATTR in node.attr and node.attr[_LOWERING_ATTR].b:
                return (f"{where} has a {node.op} node {node.name!r} that TensorFlow lowers to v1 control flow "
                        f"(Switch, Merge, ...) when it instantiates the function")
            op_def = op_def_registry.get(node.op)  # None for a call of a library function by name
            if op_def is not None and any(arg.is_ref for arg in op_def.output_arg):
                return f"{where} has reference-typed outputs ({node.op} node {node.name!r})"
    return None


def choose_executor(concrete: Any) -> ExecutorChoice:
    """The executor ``FastCaller`` calls ``concrete`` under: ``SINGLE_THREADED_EXECUTOR`` where all of these hold,
    else ``DEFAULT_EXECUTOR``.

    * This TensorFlow can select a function's executor (``tf.experimental.function_executor_type``).
    * TensorFlow sees no GPU or TPU: the single-threaded executor is for a CPU host's tiny ops, and not every
      device supports it.
    * TensorFlow sees one CPU device: the executor cannot wait for a tensor another device sends.
    * ``executor_refusal(concrete)`` finds nothing the executor refuses.
    """
    if getattr(tf.experimental, "function_executor_type", None) is None:
        return ExecutorChoice(DEFAULT_EXECUTOR, "this TensorFlow cannot select a function's executor")
    accelerators = tf.config.list_logical_devices("GPU") + tf.config.list_logical_devices("TPU")
    if accelerators:
        return ExecutorChoice(DEFAULT_EXECUTOR, f"TensorFlow sees {accelerators[0].name}")
    cpus = tf.config.list_logical_devices("CPU")
    if len(cpus) > 1:
        # A step that reads another device's variables (a mirrored copy, a table) sends tensors between devices,
        # and the single-threaded executor, which runs one op at a time, waits forever on such a receive.
        return ExecutorChoice(DEFAULT_EXECUTOR, f"TensorFlow sees {len(cpus)} CPU devices (--virtual_cpu_devices)")
    refusal = executor_refusal(concrete)
    if refusal is not None:
        return ExecutorChoice(DEFAULT_EXECUTOR, f"the single-threaded executor refuses it: {refusal}")
    return ExecutorChoice(SINGLE_THREADED_EXECUTOR,
                          "CPU only, and the graph has nothing the single-threaded executor refuses")


class FastCaller:
    """``caller(flat_tensors) -> structured outputs``: ``flat_caller(concrete)`` under the executor that
    ``choose_executor(concrete)`` picks, decided once, here, before the first call."""

    def __init__(self, concrete: Any) -> None:
        self.direct = has_flat_entry_point(concrete)
        """Whether calls go through the internal flat entry point (else the concrete function's public call)."""
        self.choice = choose_executor(concrete)
        self._call = flat_caller(concrete)
        self._scope: Optional[Callable[[], ContextManager[Any]]] = None
        if self.choice.name == SINGLE_THREADED_EXECUTOR:
            self._scope = functools.partial(tf.experimental.function_executor_type, SINGLE_THREADED_EXECUTOR)

    @property
    def executor(self) -> str:
        """``SINGLE_THREADED_EXECUTOR`` or ``DEFAULT_EXECUTOR``: see ``choice.reason`` for why."""
        return self.choice.name

    def __call__(self, flat: Sequence[Any]) -> Any:
        if self._scope is None:
            return self._call(flat)
        with self._scope():
            return self._call(flat)
