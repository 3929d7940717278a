"""Install-time conversion of the shipped MiniLM file into one that computes in int8.

The shipped file stores its weights as int8, but turns them back into float
inside the graph (Cast, then Mul by a scale): onnxruntime folds that into
float32 constants and runs all 48 MatMuls in float32. The conversion, run once
by `candor models`:

1. folds the dequantisation: each Cast(int8 constant) -> Mul(scale) becomes
   its float32 product, which is the plain float32 model;
2. fuses it: onnxruntime's transformer optimizer (SkipLayerNormalization,
   BiasGelu; Python fusions only, so the result does not depend on the CPU it
   was made on), then each layer's attention into one Attention node, which
   the optimizer's patterns miss in this export, dropping the softmax's NaN
   guards on the way (they never change a value here; see drop_nan_guards);
3. quantizes it with `quantize_dynamic`: int8 weights with a scale per output
   channel, activations quantized per call (Attention becomes QAttention). The
   feed-forward output MatMuls of layers 0 and 2 stay float32: they are the
   most sensitive. On GATE_TEXTS the lowest cosine to the shipped model is
   0.9938 so; 0.9895 with those two in int8 too; 0.979 with one scale per
   tensor instead of per channel (0.90 on the Git manual in FACTS.md).

Steps 1-3 without the attention fusion measured 1.5-1.7x faster than the
shipped file at one thread on an AVX-512 VNNI CPU (FACTS.md, onnxruntime 1.32.0,
onnx 1.23.2); the attention fusion is computed exactly (cosine 1.0 before
quantization) and made it about 1.3x faster again. Every run gives the same
bytes. `min_cosine` checks a converted file against the shipped one on
`GATE_TEXTS` before it is used (see model_files.prepare_embedding_model).

onnx, sympy and onnxruntime's tools are install-time dependencies (the `local`
extra): nothing at run time imports this module.
"""

from __future__ import annotations

import logging
import tempfile
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

from candor.ports import Embedder

# all-MiniLM-L6-v2's shape: the transformer optimizer needs it to match patterns.
HEADS = 12
HIDDEN = 384
INTERMEDIATE = 1536
# Layers whose feed-forward output MatMul stays float32 (see the module docstring).
FP32_FFN_LAYERS = (0, 2)

# The fixed sample a converted file must agree on with the shipped one: passages
# of the length ingestion embeds (title and heading first), and questions as
# visitors type them, short and long.
GATE_TEXTS = (
    "git-push(1) — OPTIONS > --force-with-lease\n"
    "--force-with-lease alone, without specifying the details, will protect all remote "
    "refs that are going to be updated by requiring their current value to be the same "
    "as the remote-tracking branch we have for them. Usually, --force-with-lease is "
    "safer than --force, because it refuses to overwrite work that others pushed to the "
    "remote in the meantime. If the remote-tracking branch was updated by a background "
    "fetch, the protection is lost; combine it with --force-if-includes to check that "
    "the local branch includes the commits you are about to overwrite.",
    "git-bisect(1) — Bisect run\n"
    "If you have a script that can tell if the current source code is good or bad, you "
    "can bisect by issuing the command git bisect run my_script arguments. The script "
    "should exit with code 0 if the current source code is good, and exit with a code "
    "between 1 and 127 (inclusive), except 125, if the current source code is bad. The "
    "special exit code 125 should be used when the current source code cannot be tested. "
    "If the script exits with this code, the current revision will be skipped.",
    "Deploying — Parameters\n"
    "sam deploy --guided asks for the stack name, the AWS Region and each parameter of "
    "the template, then saves the answers in samconfig.toml so that later deploys need "
    "no questions. The OpenAI and Pinecone keys are never parameters: store them as "
    "SecureString parameters in Systems Manager and give the functions their names. "
    "The daily budget, the allowed origins and the rate limits are parameters with "
    "defaults; change them with sam deploy --parameter-overrides.",
    "Configuration\n"
    "| variable | default | what it does |\n"
    "| CANDOR_TOP_K | 3 | passages shown to the model per question |\n"
    "| CANDOR_MAX_ATTEMPTS | 2 | retrieval attempts before declining |\n"
    "| CANDOR_DATA_DIR | .candor | where the index and state are kept |",
    "def reserve(self, amount: float) -> bool:\n"
    "    limit = self.cap - amount\n"
    "    return self.table.update(condition='spent <= :limit', values={':limit': limit})",
    "Le fichier de configuration est lu au démarrage ; une valeur invalide arrête le "
    "service avec un message qui nomme la variable fautive.",
    "How do I undo my last commit but keep the changes in my working tree?",
    "Which setting changes how many passages are retrieved?",
    "What does exit code 125 mean for git bisect run?",
    "typo in last commit msg",
    "tags not on the server",
    "How do I deploy candor to AWS?",
)
MIN_COSINE = 0.99
# Names the steps and settings of `convert`; a cached conversion made by
# another recipe is made again. Change it whenever `convert` changes.
RECIPE = "fold, bert fusions, attention, dynamic int8 per channel, ffn-out 0+2 fp32"


def convert(
    source: Path,
    target: Path,
    *,
    per_channel: bool = True,
    fp32_layers: Sequence[int] = FP32_FFN_LAYERS,
    attention: bool = True,
) -> None:
    """Write the int8-MatMul form of the MiniLM file `source` to `target`.

    `per_channel=False` (one scale per weight tensor), `fp32_layers` and
    `attention=False` (leave the attention unfused) exist to measure and test
    the recipe; the defaults are the one that passed.
    """
    model = onnx.load(str(source))
    if fold_dequantization(model) == 0:
        raise ValueError(f"{source} has no Cast -> Mul dequantisation to fold")
    with tempfile.TemporaryDirectory(prefix="candor-convert-") as work:
        fused = Path(work) / "fused.onnx"
        fuse(model, fused, attention=attention)
        ffn_outputs = ffn_output_matmuls(onnx.load(str(fused)))
        quantize(
            fused,
            target,
            per_channel=per_channel,
            exclude=[ffn_outputs[layer] for layer in fp32_layers],
        )


def fold_dequantization(model: onnx.ModelProto) -> int:
    """Replace each Cast(int8 constant) -> Mul(constant scale) by its product; in place.

    Returns the number of weights folded. The product is computed as onnxruntime
    computes it (int8 to float32, times the float32 scale), so the folded model
    is the model onnxruntime ran before, bit for bit.
    """
    graph = model.graph
    constants = {init.name: init for init in graph.initializer}
    consumers: defaultdict[str, list[onnx.NodeProto]] = defaultdict(list)
    for node in graph.node:
        for name in node.input:
            consumers[name].append(node)
    folded: list[onnx.TensorProto] = []
    dropped_nodes: set[str] = set()
    dropped_constants: set[str] = set()
    for cast in graph.node:
        if cast.op_type != "Cast" or cast.input[0] not in constants:
            continue
        users = consumers[cast.output[0]]
        if len(users) != 1 or users[0].op_type != "Mul":
            continue
        mul = users[0]
        scales = [name for name in mul.input if name != cast.output[0]]
        if len(scales) != 1 or scales[0] not in constants:
            continue
        quantized = numpy_helper.to_array(constants[cast.input[0]])
        scale = numpy_helper.to_array(constants[scales[0]])
        weight = (quantized.astype(np.float32) * scale.astype(np.float32)).astype(np.float32)
        folded.append(numpy_helper.from_array(weight, mul.output[0]))
        dropped_nodes.update(cast.output)
        dropped_nodes.update(mul.output)
        dropped_constants.update((cast.input[0], scales[0]))
    nodes = [n for n in graph.node if not dropped_nodes.intersection(n.output)]
    # A quantized constant or scale that something else still reads must stay.
    still_read = {name for n in nodes for name in n.input}
    constants_kept = [
        init
        for init in graph.initializer
        if init.name not in dropped_constants or init.name in still_read
    ]
    del graph.node[:]
    graph.node.extend(nodes)
    del graph.initializer[:]
    graph.initializer.extend([*constants_kept, *folded])
    return len(folded)


def fuse(model: onnx.ModelProto, target: Path, *, attention: bool = True) -> None:
    """onnxruntime's BERT fusions, then the attention fusion they miss; saved to `target`.

    The optimizer runs its Python fusions only (opt_level 0: no session, nothing
    specific to this CPU). It fuses SkipLayerNormalization and BiasGelu, but not
    the attention of this export (torch.export's scaled_dot_product_attention
    does not match its patterns): `drop_nan_guards` and `fuse_attention` do that.
    The optimizer writes the file, sorting the nodes and declaring the
    com.microsoft opset the fused operators need.
    """
    from onnxruntime.transformers.optimizer import optimize_model

    optimized = optimize_model(
        model, model_type="bert", num_heads=HEADS, hidden_size=HIDDEN, opt_level=0
    )
    if attention:
        drop_nan_guards(optimized.model)
        fuse_attention(optimized.model)
        optimized.prune_graph()
    optimized.save_model_to_file(str(target))


def drop_nan_guards(model: onnx.ModelProto) -> int:
    """Remove each Where(IsNaN(p), c, p) that follows a Softmax; in place; returns how many.

    The exporter guards attention rows whose every key is masked, where a softmax
    of -inf scores would be NaN. This export masks with the lowest finite float,
    not -inf, so a softmax of finite scores is never NaN and the guard never
    changes a value; it only reads and writes every attention matrix twice more.
    """
    graph = model.graph
    producers = {out: node for node in graph.node for out in node.output}
    replaced: dict[str, str] = {}
    guards: list[onnx.NodeProto] = []
    for node in graph.node:
        if node.op_type != "Where":
            continue
        test = producers.get(node.input[0])
        if test is None or test.op_type != "IsNaN" or test.input[0] != node.input[2]:
            continue
        softmax = producers.get(test.input[0])
        if softmax is not None and softmax.op_type == "Softmax":
            replaced[node.output[0]] = node.input[2]
            guards += [node, test]
    _rewire(graph, replaced)
    kept = [node for node in graph.node if all(node is not guard for guard in guards)]
    del graph.node[:]
    graph.node.extend(kept)
    return len(replaced)


def fuse_attention(model: onnx.ModelProto) -> int:
    """Replace each layer's self-attention subgraph by one com.microsoft Attention node.

    From the output side: Reshape(Transpose(MatMul(Softmax(QK^T + mask), V))),
    where Q, K and V are Add(MatMul(x, W), b) reshaped into heads, Q and K each
    scaled by a constant. The Attention node takes x, the three weights side by
    side, the three biases, the 0/1 attention mask and the product of the two
    scales; onnxruntime's kernel computes the same thing in one pass, and
    quantize_dynamic turns it into QAttention (int8 Q, K, V projections). The
    old nodes are left unused, for the caller to prune. Raises ValueError if no
    attention matches.
    """
    graph = model.graph
    constants = {init.name: init for init in graph.initializer}
    producers = {out: node for node in graph.node for out in node.output}
    consumers: defaultdict[str, list[onnx.NodeProto]] = defaultdict(list)
    for node in graph.node:
        for name in node.input:
            consumers[name].append(node)
    if "attention_mask" not in {i.name for i in graph.input}:
        raise ValueError("the model takes no attention_mask input")
    mask = "candor_attention_mask_int32"
    added: list[onnx.NodeProto] = []
    replaced: dict[str, str] = {}

    def only_user(name: str, op_type: str) -> onnx.NodeProto:
        users = consumers[name]
        if len(users) != 1 or users[0].op_type != op_type:
            raise ValueError(f"attention: {name} does not feed one {op_type}")
        return users[0]

    def projection(name: str) -> tuple[str, str, str, float]:
        """(x, W, b, scale) of Add(MatMul(x, W), b) under Reshape/Transpose/Mul(constant)."""
        scale = 1.0
        while True:
            node = producers.get(name)
            if node is None:
                raise ValueError(f"attention: {name} is no projection")
            if node.op_type in ("Reshape", "Transpose"):
                name = node.input[0]
            elif node.op_type == "Mul" and node.input[1] in constants:
                factor = numpy_helper.to_array(constants[node.input[1]])
                if factor.size != 1:
                    raise ValueError(f"attention: {node.name} scales by a tensor")
                scale *= float(factor.reshape(()))
                name = node.input[0]
            elif node.op_type == "Add":
                (bias,) = [i for i in node.input if i in constants] or [""]
                (other,) = [i for i in node.input if i != bias] or [""]
                matmul = producers.get(other)
                if not bias or matmul is None or matmul.op_type != "MatMul":
                    raise ValueError(f"attention: {node.name} is not MatMul + bias")
                if matmul.input[1] not in constants:
                    raise ValueError(f"attention: {matmul.name} has no constant weight")
                return matmul.input[0], matmul.input[1], bias, scale
            else:
                raise ValueError(f"attention: unexpected {node.op_type} {node.name}")

    for softmax in [n for n in graph.node if n.op_type == "Softmax"]:
        scores = producers[softmax.input[0]]
        if scores.op_type != "Add":
            raise ValueError(f"attention: {softmax.name} does not follow a masked score")
        (qk,) = [
            producers[i]
            for i in scores.input
            if i in producers and producers[i].op_type in ("MatMul", "FusedMatMul")
        ]
        weighted = only_user(softmax.output[0], "MatMul")
        heads = only_user(weighted.output[0], "Transpose")
        merged = only_user(heads.output[0], "Reshape")
        x_q, w_q, b_q, s_q = projection(qk.input[0])
        x_k, w_k, b_k, s_k = projection(qk.input[1])
        x_v, w_v, b_v, s_v = projection(weighted.input[1])
        if not x_q == x_k == x_v or s_v != 1.0:
            raise ValueError(f"attention: {softmax.name} mixes inputs or scales V")
        layer = len(replaced)
        weight = np.concatenate(
            [numpy_helper.to_array(constants[w]) for w in (w_q, w_k, w_v)], axis=1
        ).astype(np.float32)
        bias = np.concatenate(
            [numpy_helper.to_array(constants[b]) for b in (b_q, b_k, b_v)]
        ).astype(np.float32)
        graph.initializer.extend(
            [
                numpy_helper.from_array(weight, f"candor_qkv_weight_{layer}"),
                numpy_helper.from_array(bias, f"candor_qkv_bias_{layer}"),
            ]
        )
        output = f"candor_attention_{layer}"
        added.append(
            onnx.helper.make_node(
                "Attention",
                [x_q, f"candor_qkv_weight_{layer}", f"candor_qkv_bias_{layer}", mask],
                [output],
                name=output,
                domain="com.microsoft",
                num_heads=HEADS,
                scale=s_q * s_k,
            )
        )
        replaced[merged.output[0]] = output
    if not replaced:
        raise ValueError("attention: no Softmax found")
    cast = onnx.helper.make_node(
        "Cast", ["attention_mask"], [mask], name=mask, to=onnx.TensorProto.INT32
    )
    _rewire(graph, replaced)
    graph.node.extend([cast, *added])
    return len(replaced)


def _rewire(graph: onnx.GraphProto, replaced: dict[str, str]) -> None:
    """Make every reader of a name in `replaced` read its replacement instead."""
    for node in graph.node:
        for slot, name in enumerate(node.input):
            if name in replaced:
                node.input[slot] = replaced[name]
    if any(out.name in replaced for out in graph.output):
        raise ValueError("a graph output cannot be replaced")


def ffn_output_matmuls(model: onnx.ModelProto) -> list[str]:
    """Names of the feed-forward output MatMuls (intermediate -> hidden), layer by layer."""
    shapes = {init.name: tuple(init.dims) for init in model.graph.initializer}
    names = [
        node.name
        for node in model.graph.node
        if node.op_type == "MatMul"
        and len(node.input) == 2
        and shapes.get(node.input[1]) == (INTERMEDIATE, HIDDEN)
    ]
    if not names:
        raise ValueError("no feed-forward output MatMul found: not a MiniLM-L6 graph")
    return names


def quantize(source: Path, target: Path, *, per_channel: bool, exclude: Sequence[str]) -> None:
    """Dynamic int8 quantization of every supported op except the nodes in `exclude`."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    # quantize_dynamic logs on the root logger, at every call, advice meant for
    # static quantization ("consider pre-processing"); the check that follows
    # the conversion is what tells whether the result is good.
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        quantize_dynamic(
            source,
            target,
            per_channel=per_channel,
            weight_type=QuantType.QInt8,
            nodes_to_exclude=list(exclude),
        )
    finally:
        root.setLevel(level)


def min_cosine(reference: Embedder, candidate: Embedder, texts: Sequence[str]) -> float:
    """The lowest cosine between the two embedders' vectors of the same text."""
    ours = candidate.embed(texts)
    theirs = reference.embed(texts)
    norms = np.linalg.norm(ours, axis=1) * np.linalg.norm(theirs, axis=1)
    cosines = np.sum(ours * theirs, axis=1) / np.maximum(norms, 1e-12)
    return float(cosines.min())
