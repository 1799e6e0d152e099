# Writes a binary mdplan.desc.Model whose one Const node "a" sits in DEPTH
# nested anonymous scopes: python3 nested_binary.py DEPTH > m.pb
import sys
def varint(n):
    out = b''
    while True:
        b = n & 0x7f
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])
depth = int(sys.argv[1])
# Innermost scope holds a Const node "a" (Scope.node = 6, Node.name = 1, Node.op = 2).
node = b'\x0a\x01a' + b'\x12\x05Const'
inner = b'\x32' + varint(len(node)) + node
for _ in range(depth - 1):
    inner = b'\x3a' + varint(len(inner)) + inner
sys.stdout.buffer.write(b'\x1a' + varint(len(inner)) + inner)
