"""tests/onnx_export_check.py: checks a model `torc export` wrote, for
tests/test_onnx_export_cli.sh.

  onnx_export_check.py check MODEL.onnx
      onnx.checker.check_model(full_check=True) and strict shape inference;
      the output's inferred shape must match the declared one.
  onnx_export_check.py run MODEL.onnx DIR B...
      onnxruntime runs the model on DIR/input_B.bin (raw f32, the input's
      shape with batch B) for each B and compares with DIR/output_B.bin,
      torc's own outputs: max |got - want| <= 1e-5 max |want|.

  onnx_export_check.py all B1,B2,... MODEL.onnx...
      both for each model (its inputs and outputs in the model's folder),
      in one process; a run that cannot import onnxruntime prints its SKIP
      line and leaves the status to the checks.

Exit status 0 pass, 1 fail, 77 when onnx (check) or onnxruntime and numpy
(run) cannot be imported, with the reason.
"""
import sys


def skip(why):
    print("SKIP: %s (python %s)" % (why, sys.executable))
    sys.exit(77)


def dims(vi):
    return [d.dim_param if d.dim_param else d.dim_value
            for d in vi.type.tensor_type.shape.dim]


def check(path):
    try:
        import onnx
        import onnx.checker
        import onnx.shape_inference
    except ImportError as e:
        skip("onnx cannot be imported: %s" % e)
    model = onnx.load(path)
    onnx.checker.check_model(model, full_check=True)
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    want, got = dims(model.graph.output[0]), dims(inferred.graph.output[0])
    if want != got:
        print("FAIL: %s: output declared %s, inferred %s" % (path, want, got))
        return 1
    ops = sorted(set(n.op_type for n in model.graph.node))
    print("PASS: onnx %s checker and shape inference: %s, input %s, "
          "output %s, ops %s" % (onnx.__version__, path,
                                 dims(model.graph.input[0]), want,
                                 " ".join(ops)))
    return 0


def run(path, folder, batches):
    try:
        import numpy as np
        import onnxruntime as ort
    except ImportError as e:
        skip("onnxruntime or numpy cannot be imported: %s" % e)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    inp = sess.get_inputs()[0]
    worst = 0.0
    for b in batches:
        shape = [int(b)] + [int(d) for d in inp.shape[1:]]
        x = np.fromfile("%s/input_%s.bin" % (folder, b),
                        dtype="<f4").reshape(shape)
        want = np.fromfile("%s/output_%s.bin" % (folder, b), dtype="<f4")
        got = sess.run(None, {inp.name: x})[0]
        if got.shape[0] != int(b) or got.size != want.size:
            print("FAIL: %s at batch %s: output shape %s, torc gave %d "
                  "values" % (path, b, got.shape, want.size))
            return 1
        err = float(np.max(np.abs(got.reshape(-1) - want)))
        scale = float(np.max(np.abs(want)))
        rel = err / scale if scale > 0 else err
        worst = max(worst, rel)
        print("  batch %s: output %s, max abs error %.3g, relative %.3g"
              % (b, list(got.shape), err, rel))
        if rel > 1e-5:
            print("FAIL: %s at batch %s: onnxruntime and torc differ by %.3g "
                  "(relative %.3g > 1e-5)" % (path, b, err, rel))
            return 1
    print("PASS: onnxruntime %s matches torc: %s, batches %s, max relative "
          "error %.3g" % (ort.__version__, path, " ".join(batches), worst))
    return 0


def main(argv):
    if len(argv) >= 3 and argv[1] == "check":
        return check(argv[2])
    if len(argv) >= 5 and argv[1] == "run":
        return run(argv[2], argv[3], argv[4:])
    if len(argv) >= 4 and argv[1] == "all":
        import os
        batches, runs = argv[2].split(","), True
        for model in argv[3:]:
            rc = check(model)
            if rc:
                return rc
            try:
                rc = run(model, os.path.dirname(model) or ".", batches) \
                    if runs else 0
            except SystemExit as e:
                if e.code != 77:
                    return e.code
                runs = False
            if rc:
                return rc
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
