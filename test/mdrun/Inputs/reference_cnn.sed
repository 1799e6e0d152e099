# examples/tf_tutorial_cnn.mdg as the NumPy reference runs it
# (numpy-reference.test, tools/gpu/pack.sh): its dense layer 32 wide
# instead of 1,024 (the checkpoints are printed and read as text).
s/shape: \[3136, 1024\]/shape: [3136, 32]/
s/shape: \[1024\]/shape: [32]/
s/shape: \[1024, 10\]/shape: [32, 10]/
