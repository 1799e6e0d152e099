"""Prints the parts of docs/GraphFormat.md's first example, so that a test
can compare what the guide shows with what mdplan prints:

  doc_example.py GRAPHFORMAT.md model     the `linear.mdg` it shows
  doc_example.py GRAPHFORMAT.md printed   the output it shows for
                                          `mdplan linear.mdg --passes= --emit=graph`
"""
import re
import sys

text = open(sys.argv[1]).read()
if sys.argv[2] == "model":
    m = re.search(r"`linear\.mdg`, a linear regression with an L2-regularized "
                  r"weight:\n\n```protobuf\n(.*?)```", text, re.S)
else:
    m = re.search(r"\$ mdplan linear\.mdg --passes= --emit=graph\n(.*?)```",
                  text, re.S)
if not m:
    sys.exit("doc_example.py: no %s example in %s" % (sys.argv[2], sys.argv[1]))
sys.stdout.write(m.group(1))
