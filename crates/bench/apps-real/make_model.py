"""Writes an ONNX model of about SIZE MiB to DIR/model.onnx (+ external
weights): a stack of MatMul layers whose random float32 weights stand in for
an on-device assistant's (no weights can be downloaded here)."""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out, size_mib = sys.argv[1], int(sys.argv[2])
os.makedirs(out, exist_ok=True)
stamp = os.path.join(out, "size")
if os.path.exists(stamp) and open(stamp).read().strip() == str(size_mib):
    sys.exit(0)
dim = 1024  # one layer: 1024 x 1024 float32 = 4 MiB
layers = max(1, size_mib // 4)
rng = np.random.default_rng(1)
inits, nodes, x = [], [], "x"
for i in range(layers):
    w = (rng.standard_normal((dim, dim), dtype=np.float32) * 0.02).astype(np.float32)
    inits.append(numpy_helper.from_array(w, name=f"w{i}"))
    nodes.append(helper.make_node("MatMul", [x, f"w{i}"], [f"h{i}"]))
    x = f"h{i}"
graph = helper.make_graph(
    nodes,
    "assistant",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, dim])],
    [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, dim])],
    initializer=inits,
)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
onnx.save_model(
    model,
    os.path.join(out, "model.onnx"),
    save_as_external_data=True,
    all_tensors_to_one_file=True,
    location="weights.bin",
)
open(stamp, "w").write(str(size_mib))
