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
# Each level is a tag and a length before the level inside it: collect the
# headers from the inside out and join once (prepending to one bytes object
# copies it every level, quadratic at 100000 levels).
heads = [b'\x32' + varint(len(node))]
size = len(node) + len(heads[0])
for _ in range(depth - 1):
    heads.append(b'\x3a' + varint(size))
    size += len(heads[-1])
heads.append(b'\x1a' + varint(size))
sys.stdout.buffer.write(b''.join(reversed(heads)) + node)
