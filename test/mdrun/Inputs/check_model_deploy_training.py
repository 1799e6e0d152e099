"""Checks model_deploy_test's training expectations on an mdrun log and the
final checkpoint: the loss after 10 steps is under a fifth of the first, and
the moving mean equals the column means of the inputs."""
import sys

log, ckpt, means_file = sys.argv[1:4]
losses = {}
for line in open(log):
    parts = line.split()
    if len(parts) == 4 and parts[0] == "step" and parts[2] == "loss":
        losses[int(parts[1])] = float(parts[3])
first, last = losses[1], losses[max(losses)]
print("initial loss %.6f, loss after %d steps %.6f" % (first, max(losses) - 1, last))
assert last < first / 5, "the loss did not fall below a fifth of its start"
means = [float(v) for v in open(means_file).read().split()]
for line in open(ckpt):
    if line.startswith("tensor BatchNormClassifier/BatchNorm/moving_mean "):
        values = [float(v) for v in line.split("=")[1].split()]
        print("moving_mean", values, "column means", means)
        assert all(abs(a - b) < 1e-4 for a, b in zip(values, means)), \
            "the moving mean is not the column means"
        break
else:
    raise AssertionError("no moving_mean in the checkpoint")
print("ok")
