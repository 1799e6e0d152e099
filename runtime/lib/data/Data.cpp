//===- Data.cpp - Datasets, IDX files and batch iteration -----------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// IDX format (http://yann.lecun.com/exdb/mnist/): a 4-byte magic
// 0x00 0x00 TT NN (TT: element type, NN: number of dims), NN big-endian
// uint32 dims, then the elements, row-major, big-endian.
//
//===----------------------------------------------------------------------===//

#include "mdrt/Data.h"
#include "mdrt/Random.h"

#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <climits>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <limits>
#include <map>
#include <mutex>
#include <new>
#include <system_error>
#include <thread>

using namespace mdrt;

namespace {

/// The memory this process can have: the machine's, or less under a
/// cgroup (container) limit; 0 if unknown.
uint64_t memoryLimit() {
  long Pages = sysconf(_SC_PHYS_PAGES), PageSize = sysconf(_SC_PAGE_SIZE);
  uint64_t Limit =
      Pages > 0 && PageSize > 0 ? uint64_t(Pages) * uint64_t(PageSize) : 0;
  // cgroup v2, then v1 ("max" or a huge number: no limit).
  for (const char *Path : {"/sys/fs/cgroup/memory.max",
                           "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    std::FILE *F = std::fopen(Path, "r");
    if (!F)
      continue;
    unsigned long long V = 0;
    bool Read = std::fscanf(F, "%llu", &V) == 1;
    std::fclose(F);
    if (Read && V > 0 && (Limit == 0 || V < Limit))
      Limit = V;
  }
  return Limit;
}

std::string quote(const std::string &S) { return "'" + S + "'"; }

std::string formatValue(double V) {
  char Buf[64];
  std::snprintf(Buf, sizeof(Buf), "%.17g", V);
  return Buf;
}

std::string shapeStr(const std::vector<int64_t> &Shape) {
  std::string S = "[";
  for (size_t I = 0; I < Shape.size(); ++I) {
    if (I)
      S += ',';
    S += std::to_string(Shape[I]);
  }
  return S + "]";
}

uint32_t loadBigEndian32(const uint8_t *P) {
  return (uint32_t(P[0]) << 24) | (uint32_t(P[1]) << 16) |
         (uint32_t(P[2]) << 8) | uint32_t(P[3]);
}

void storeBigEndian32(uint8_t *P, uint32_t V) {
  P[0] = uint8_t(V >> 24);
  P[1] = uint8_t(V >> 16);
  P[2] = uint8_t(V >> 8);
  P[3] = uint8_t(V);
}

bool hostIsLittleEndian() {
  uint16_t One = 1;
  uint8_t First;
  std::memcpy(&First, &One, 1);
  return First == 1;
}

/// Copies \p Count elements of \p Size bytes, reversing the bytes of each
/// on little-endian hosts (IDX data is big-endian).
void copySwapped(const uint8_t *Src, uint8_t *Dst, size_t Count, size_t Size) {
  if (Count == 0) // An empty array's buffer may be null.
    return;
  if (Size == 1 || !hostIsLittleEndian()) {
    std::memcpy(Dst, Src, Count * Size);
    return;
  }
  for (size_t I = 0; I < Count; ++I, Src += Size, Dst += Size)
    for (size_t B = 0; B < Size; ++B)
      Dst[B] = Src[Size - 1 - B];
}

StatusOr<std::vector<uint8_t>> readWholeFile(const std::string &Path) {
  std::FILE *F = std::fopen(Path.c_str(), "rb");
  if (!F)
    return Status::error("cannot open " + quote(Path) + ": " +
                         std::strerror(errno));
  std::vector<uint8_t> Bytes;
  uint8_t Buf[1 << 16];
  size_t N;
  while ((N = std::fread(Buf, 1, sizeof(Buf), F)) > 0)
    Bytes.insert(Bytes.end(), Buf, Buf + N);
  bool Failed = std::ferror(F);
  int Err = errno;
  std::fclose(F);
  if (Failed)
    return Status::error("cannot read " + quote(Path) + ": " +
                         std::strerror(Err));
  return Bytes;
}

StatusOr<std::vector<uint8_t>> gunzip(const std::vector<uint8_t> &In,
                                      const std::string &Path) {
  if (In.size() > UINT_MAX)
    return Status::error("gzip file " + quote(Path) + " is too large");
  // The last 4 bytes hold the size of the (last member's) data modulo 2^32:
  // a hint for the output buffer, grown when it is wrong.
  size_t Hint = 1 << 20;
  if (In.size() >= 18) {
    const uint8_t *T = In.data() + In.size() - 4;
    size_t ISize = size_t(T[0]) | (size_t(T[1]) << 8) | (size_t(T[2]) << 16) |
                   (size_t(T[3]) << 24);
    // Deflate expands at most about 1032 times; a truncated file's "size"
    // is garbage.
    Hint = std::min<size_t>({std::max<size_t>(ISize + 1, 1 << 16),
                             In.size() * 1032 + 1024, size_t(1) << 30});
  }
  std::vector<uint8_t> Out(Hint);
  z_stream S;
  std::memset(&S, 0, sizeof(S));
  if (inflateInit2(&S, 15 + 16) != Z_OK)
    return Status::error("cannot initialize zlib for " + quote(Path));
  S.next_in = const_cast<Bytef *>(In.data());
  S.avail_in = uInt(In.size());
  size_t Produced = 0;
  while (true) {
    if (Produced == Out.size())
      Out.resize(Out.size() * 2);
    size_t Room = std::min<size_t>(Out.size() - Produced, UINT_MAX);
    S.next_out = Out.data() + Produced;
    S.avail_out = uInt(Room);
    int Ret = inflate(&S, Z_NO_FLUSH);
    Produced += Room - S.avail_out;
    if (Ret == Z_STREAM_END) {
      // Another gzip member may follow (as `cat a.gz b.gz` makes).
      if (S.avail_in == 0)
        break;
      if (S.avail_in >= 2 && S.next_in[0] == 0x1f && S.next_in[1] == 0x8b) {
        inflateReset(&S);
        continue;
      }
      inflateEnd(&S);
      return Status::error("gzip file " + quote(Path) + " has " +
                           std::to_string(S.avail_in) +
                           " bytes of trailing garbage");
    }
    if (Ret == Z_OK)
      continue;
    if (Ret == Z_BUF_ERROR && S.avail_out == 0)
      continue; // Out of room: grow and go on.
    std::string Msg;
    if (Ret == Z_BUF_ERROR)
      Msg = "gzip file " + quote(Path) + " is truncated";
    else
      Msg = "gzip error in " + quote(Path) + ": " +
            (S.msg ? std::string(S.msg) : "error " + std::to_string(Ret));
    inflateEnd(&S);
    return Status::error(Msg);
  }
  inflateEnd(&S);
  Out.resize(Produced);
  return Out;
}

/// Parses `<Split>-<Middle>-idx<N>-ubyte[.gz]`; returns Middle, or an empty
/// string when \p Name does not have that form.
std::string idxFileMiddle(const std::string &Name, const std::string &Split) {
  std::string S = Name;
  auto EndsWith = [&](const std::string &Suffix) {
    return S.size() >= Suffix.size() &&
           S.compare(S.size() - Suffix.size(), Suffix.size(), Suffix) == 0;
  };
  if (EndsWith(".gz"))
    S.resize(S.size() - 3);
  if (!EndsWith("-ubyte"))
    return "";
  S.resize(S.size() - 6);
  size_t Idx = S.rfind("-idx");
  if (Idx == std::string::npos || Idx + 4 == S.size())
    return "";
  for (size_t I = Idx + 4; I < S.size(); ++I)
    if (S[I] < '0' || S[I] > '9')
      return "";
  std::string Prefix = Split + "-";
  if (Idx <= Prefix.size() || S.compare(0, Prefix.size(), Prefix) != 0)
    return "";
  return S.substr(Prefix.size(), Idx - Prefix.size());
}

StatusOr<std::vector<std::string>> listDirectory(const std::string &Dir) {
  namespace fs = std::filesystem;
  std::error_code EC;
  fs::directory_iterator It(Dir, EC);
  if (EC)
    return Status::error("cannot read dataset directory " + quote(Dir) + ": " +
                         EC.message());
  std::vector<std::string> Names;
  for (fs::directory_iterator End; It != End; It.increment(EC)) {
    if (EC)
      return Status::error("cannot read dataset directory " + quote(Dir) +
                           ": " + EC.message());
    Names.push_back(It->path().filename().string());
  }
  std::sort(Names.begin(), Names.end());
  return Names;
}

std::string joinPath(const std::string &Dir, const std::string &Name) {
  if (Dir.empty() || Dir.back() == '/')
    return Dir + Name;
  return Dir + "/" + Name;
}

std::string stripGz(const std::string &Name) {
  if (Name.size() > 3 && Name.compare(Name.size() - 3, 3, ".gz") == 0)
    return Name.substr(0, Name.size() - 3);
  return Name;
}

/// Among file names of one feature, the one to load: raw before gzipped;
/// different files are ambiguous.
StatusOr<std::string> pickFile(const std::vector<std::string> &Names,
                               const std::string &Feature,
                               const std::string &Dir) {
  std::string Stem = stripGz(Names.front());
  for (const std::string &N : Names)
    if (stripGz(N) != Stem)
      return Status::error("feature " + quote(Feature) + " is ambiguous in " +
                           quote(Dir) + ": both " + quote(Names.front()) +
                           " and " + quote(N) + " match");
  for (const std::string &N : Names)
    if (N == Stem)
      return N;
  return Names.front();
}

bool isFloatIdx(IdxType T) {
  return T == IdxType::Float32 || T == IdxType::Float64;
}

bool isIntDType(DType T) { return T == DType::Int32 || T == DType::Int64; }

/// Element \p I of \p A as a double (exact for every IDX type).
double elementAsDouble(const IdxArray &A, int64_t I) {
  switch (A.Type) {
  case IdxType::UInt8:
    return A.as<uint8_t>()[I];
  case IdxType::Int8:
    return A.as<int8_t>()[I];
  case IdxType::Int16:
    return A.as<int16_t>()[I];
  case IdxType::Int32:
    return A.as<int32_t>()[I];
  case IdxType::Float32:
    return A.as<float>()[I];
  case IdxType::Float64:
    return A.as<double>()[I];
  }
  return 0;
}

template <typename S, typename D>
void convertRow(const uint8_t *Src, void *Dst, int64_t N) {
  const S *In = reinterpret_cast<const S *>(Src);
  D *Out = static_cast<D *>(Dst);
  for (int64_t I = 0; I < N; ++I)
    Out[I] = D(In[I]); // NOLINT(bugprone-signed-char-misuse): IDX 0x09 bytes
}

template <typename D> const D *byteScaleTable() {
  static const auto Table = [] {
    std::vector<D> T(256);
    for (int I = 0; I < 256; ++I)
      T[I] = D(I) / D(255);
    return T;
  }();
  return Table.data();
}

template <typename D>
void convertScaledBytes(const uint8_t *Src, void *Dst, int64_t N) {
  const D *Table = byteScaleTable<D>();
  D *Out = static_cast<D *>(Dst);
  for (int64_t I = 0; I < N; ++I)
    Out[I] = Table[Src[I]];
}

using RowFn = void (*)(const uint8_t *, void *, int64_t);

template <typename S> RowFn rowFnTo(DType To) {
  switch (To) {
  case DType::Float32:
    return convertRow<S, float>;
  case DType::Float64:
    return convertRow<S, double>;
  case DType::Int32:
    return convertRow<S, int32_t>;
  case DType::Int64:
    return convertRow<S, int64_t>;
  default:
    return nullptr;
  }
}

RowFn rowFn(IdxType From, DType To, bool ScaleBytes) {
  switch (From) {
  case IdxType::UInt8:
    if (ScaleBytes && To == DType::Float32)
      return convertScaledBytes<float>;
    if (ScaleBytes && To == DType::Float64)
      return convertScaledBytes<double>;
    return rowFnTo<uint8_t>(To);
  case IdxType::Int8:
    return rowFnTo<int8_t>(To);
  case IdxType::Int16:
    return rowFnTo<int16_t>(To);
  case IdxType::Int32:
    return rowFnTo<int32_t>(To);
  case IdxType::Float32:
    return rowFnTo<float>(To);
  case IdxType::Float64:
    return rowFnTo<double>(To);
  }
  return nullptr;
}

/// True when the bytes of an element of \p From are those of \p To.
bool sameRepresentation(IdxType From, DType To) {
  return (From == IdxType::Int32 && To == DType::Int32) ||
         (From == IdxType::Float32 && To == DType::Float32) ||
         (From == IdxType::Float64 && To == DType::Float64);
}

} // namespace

//===----------------------------------------------------------------------===//
// IDX files
//===----------------------------------------------------------------------===//

const char *mdrt::idxTypeName(IdxType T) {
  switch (T) {
  case IdxType::UInt8:
    return "ubyte";
  case IdxType::Int8:
    return "sbyte";
  case IdxType::Int16:
    return "int16";
  case IdxType::Int32:
    return "int32";
  case IdxType::Float32:
    return "float32";
  case IdxType::Float64:
    return "float64";
  }
  return "invalid";
}

size_t mdrt::idxTypeSize(IdxType T) {
  switch (T) {
  case IdxType::UInt8:
  case IdxType::Int8:
    return 1;
  case IdxType::Int16:
    return 2;
  case IdxType::Int32:
  case IdxType::Float32:
    return 4;
  case IdxType::Float64:
    return 8;
  }
  return 0;
}

bool mdrt::isValidIdxType(uint8_t Byte) {
  return Byte == 0x08 || Byte == 0x09 || Byte == 0x0B || Byte == 0x0C ||
         Byte == 0x0D || Byte == 0x0E;
}

int64_t IdxArray::numElements() const {
  int64_t N = 1;
  for (uint32_t D : Dims)
    N *= int64_t(D);
  return N;
}

std::string IdxArray::str() const {
  std::string S = idxTypeName(Type);
  S += '[';
  for (size_t I = 0; I < Dims.size(); ++I) {
    if (I)
      S += ',';
    S += std::to_string(Dims[I]);
  }
  return S + "]";
}

StatusOr<IdxArray> mdrt::parseIdx(const uint8_t *Bytes, size_t Size,
                                  const std::string &Name) {
  std::string What = "idx file " + quote(Name);
  if (Size < 4)
    return Status::error(What + " is truncated: " + std::to_string(Size) +
                         " bytes, fewer than the 4-byte magic");
  uint32_t Magic = loadBigEndian32(Bytes);
  if (Bytes[0] != 0 || Bytes[1] != 0 || !isValidIdxType(Bytes[2]) ||
      Bytes[3] == 0) {
    char Buf[16];
    std::snprintf(Buf, sizeof(Buf), "0x%08x", unsigned(Magic));
    return Status::error(What + " has a bad magic number " + Buf +
                         " (expected 0x0000TTNN with a type TT in 08, 09, "
                         "0b, 0c, 0d, 0e and NN > 0 dims)");
  }
  IdxArray A;
  A.Type = IdxType(Bytes[2]);
  unsigned NumDims = Bytes[3];
  size_t HeaderBytes = 4 + 4 * size_t(NumDims);
  if (Size < HeaderBytes)
    return Status::error(What + " is truncated: its header needs " +
                         std::to_string(HeaderBytes) + " bytes, it has " +
                         std::to_string(Size));
  // Dims are each < 2^32; stop before the product overflows. A zero
  // dimension empties the array but not the products of the others (the
  // elements per example), which must fit as well.
  unsigned __int128 Elements = 1, Bound = 1;
  for (unsigned I = 0; I < NumDims; ++I) {
    A.Dims.push_back(loadBigEndian32(Bytes + 4 + 4 * I));
    Elements *= A.Dims.back();
    Bound *= std::max<uint32_t>(A.Dims.back(), 1);
    if (Bound > (uint64_t(1) << 48))
      return Status::error(What + " is corrupt: " + A.str() +
                           "... is too large");
  }
  size_t ElemSize = idxTypeSize(A.Type);
  size_t DataBytes = size_t(Elements) * ElemSize;
  size_t Available = Size - HeaderBytes;
  if (Available < DataBytes)
    return Status::error(What + " is truncated: the header says " + A.str() +
                         ", " + std::to_string(DataBytes) +
                         " bytes of data, but it has " +
                         std::to_string(Available));
  if (Available > DataBytes)
    return Status::error(
        What + " is corrupt: " + std::to_string(Available - DataBytes) +
        " bytes follow the " + A.str() + " data");
  A.Data.resize(DataBytes);
  copySwapped(Bytes + HeaderBytes, A.Data.data(), size_t(Elements), ElemSize);
  return A;
}

std::vector<uint8_t> mdrt::encodeIdx(const IdxArray &A) {
  size_t HeaderBytes = 4 + 4 * A.Dims.size();
  size_t ElemSize = idxTypeSize(A.Type);
  size_t Count = size_t(A.numElements());
  assert(A.Data.size() == Count * ElemSize && "idx array data size");
  std::vector<uint8_t> Out(HeaderBytes + Count * ElemSize);
  Out[0] = 0;
  Out[1] = 0;
  Out[2] = uint8_t(A.Type);
  Out[3] = uint8_t(A.Dims.size());
  for (size_t I = 0; I < A.Dims.size(); ++I)
    storeBigEndian32(Out.data() + 4 + 4 * I, A.Dims[I]);
  copySwapped(A.Data.data(), Out.data() + HeaderBytes, Count, ElemSize);
  return Out;
}

Status mdrt::writeIdxFile(const std::string &Path, const IdxArray &A,
                          bool Gzip) {
  if (A.Dims.empty() || A.Dims.size() > 255)
    return Status::error("cannot write " + quote(Path) +
                         ": an idx array has 1 "
                         "to 255 dims, this one has " +
                         std::to_string(A.Dims.size()));
  if (A.Data.size() != A.bytes())
    return Status::error("cannot write " + quote(Path) + ": " + A.str() +
                         " needs " + std::to_string(A.bytes()) +
                         " bytes of data, it has " +
                         std::to_string(A.Data.size()));
  std::vector<uint8_t> Bytes = encodeIdx(A);
  if (Gzip) {
    gzFile F = gzopen(Path.c_str(), "wb");
    if (!F)
      return Status::error("cannot create " + quote(Path) + ": " +
                           std::strerror(errno));
    size_t Done = 0;
    while (Done < Bytes.size()) {
      unsigned Chunk = unsigned(std::min<size_t>(Bytes.size() - Done, 1 << 30));
      if (gzwrite(F, Bytes.data() + Done, Chunk) != int(Chunk)) {
        int Err;
        std::string Msg = gzerror(F, &Err);
        gzclose(F);
        return Status::error("cannot write " + quote(Path) + ": " + Msg);
      }
      Done += Chunk;
    }
    if (gzclose(F) != Z_OK)
      return Status::error("cannot write " + quote(Path));
    return Status::ok();
  }
  std::FILE *F = std::fopen(Path.c_str(), "wb");
  if (!F)
    return Status::error("cannot create " + quote(Path) + ": " +
                         std::strerror(errno));
  bool Ok = std::fwrite(Bytes.data(), 1, Bytes.size(), F) == Bytes.size();
  Ok &= std::fclose(F) == 0;
  if (!Ok)
    return Status::error("cannot write " + quote(Path) + ": " +
                         std::strerror(errno));
  return Status::ok();
}

StatusOr<std::vector<uint8_t>>
mdrt::readMaybeGzippedFile(const std::string &Path) {
  StatusOr<std::vector<uint8_t>> Bytes = readWholeFile(Path);
  if (!Bytes)
    return Bytes.status();
  if (Bytes->size() >= 2 && (*Bytes)[0] == 0x1f && (*Bytes)[1] == 0x8b)
    return gunzip(*Bytes, Path);
  return Bytes;
}

StatusOr<IdxArray> mdrt::readIdxFile(const std::string &Path) {
  StatusOr<std::vector<uint8_t>> Bytes = readMaybeGzippedFile(Path);
  if (!Bytes)
    return Bytes.status();
  return parseIdx(Bytes->data(), Bytes->size(), Path);
}

//===----------------------------------------------------------------------===//
// Datasets
//===----------------------------------------------------------------------===//

std::vector<int64_t> Feature::exampleShape() const {
  std::vector<int64_t> Shape;
  for (size_t I = 1; I < Array.Dims.size(); ++I)
    Shape.push_back(Array.Dims[I]);
  return Shape;
}

int64_t Feature::exampleElements() const {
  int64_t N = 1;
  for (size_t I = 1; I < Array.Dims.size(); ++I)
    N *= int64_t(Array.Dims[I]);
  return N;
}

int64_t FeatureRequest::exampleElements() const {
  int64_t N = 1;
  for (int64_t D : Shape)
    N *= D;
  return N;
}

StatusOr<bool> mdrt::hasSplitFiles(const std::string &Dir,
                                   const std::string &Split) {
  StatusOr<std::vector<std::string>> Names = listDirectory(Dir);
  if (!Names)
    return Names.status();
  for (const std::string &N : *Names)
    if (!idxFileMiddle(N, Split).empty())
      return true;
  return false;
}

StatusOr<std::string> mdrt::findFeatureFile(const std::string &Dir,
                                            const std::string &Split,
                                            const std::string &Feature) {
  StatusOr<std::vector<std::string>> Names = listDirectory(Dir);
  if (!Names)
    return Names.status();
  std::vector<std::string> Matches;
  for (const std::string &N : *Names) {
    std::string Middle = idxFileMiddle(N, Split);
    if (!Middle.empty() && (Middle == Feature + "s" || Middle == Feature))
      Matches.push_back(N);
  }
  if (Matches.empty() && Feature.find('/') != std::string::npos)
    // An Input in a scope without a feature of its own is named after its
    // full name, which no file in a directory can hold.
    return Status::error("no file can hold feature " + quote(Feature) +
                         " of split " + quote(Split) +
                         ": a file name has no '/' (an Input in a scope "
                         "reads the feature of its full name unless it "
                         "names one: data { feature: \"...\" })");
  if (Matches.empty())
    return Status::error(
        "no file for feature " + quote(Feature) + " of split " + quote(Split) +
        " in " + quote(Dir) + " (looked for " + Split + "-" + Feature +
        "s-idx*-ubyte[.gz] and " + Split + "-" + Feature + "-idx*-ubyte[.gz])");
  StatusOr<std::string> Picked = pickFile(Matches, Feature, Dir);
  if (!Picked)
    return Picked.status();
  return joinPath(Dir, *Picked);
}

StatusOr<Dataset> Dataset::load(const std::string &Dir,
                                const std::string &Split,
                                const std::vector<std::string> &Features) {
  std::vector<std::pair<std::string, std::string>> Files;
  if (!Features.empty()) {
    for (const std::string &F : Features) {
      StatusOr<std::string> Path = findFeatureFile(Dir, Split, F);
      if (!Path)
        return Path.status();
      Files.emplace_back(F, *Path);
    }
    return loadFiles(Files);
  }
  StatusOr<std::vector<std::string>> Names = listDirectory(Dir);
  if (!Names)
    return Names.status();
  std::map<std::string, std::vector<std::string>> ByFeature;
  for (const std::string &N : *Names) {
    std::string Middle = idxFileMiddle(N, Split);
    if (Middle.empty())
      continue;
    if (Middle.size() > 1 && Middle.back() == 's')
      Middle.pop_back();
    ByFeature[Middle].push_back(N);
  }
  if (ByFeature.empty())
    return Status::error("no idx files of split " + quote(Split) + " in " +
                         quote(Dir) + " (looked for " + Split +
                         "-<feature>-idx*-ubyte[.gz])");
  for (auto &[Feature, Matches] : ByFeature) {
    StatusOr<std::string> Picked = pickFile(Matches, Feature, Dir);
    if (!Picked)
      return Picked.status();
    Files.emplace_back(Feature, joinPath(Dir, *Picked));
  }
  return loadFiles(Files);
}

StatusOr<Dataset> Dataset::loadFiles(
    const std::vector<std::pair<std::string, std::string>> &Files) {
  Dataset D;
  for (const auto &[Name, Path] : Files) {
    StatusOr<IdxArray> A = readIdxFile(Path);
    if (!A)
      return A.status().withContext("loading feature " + quote(Name));
    Feature F;
    F.Name = Name;
    F.Source = Path;
    F.Array = A.take();
    MDRT_RETURN_IF_ERROR(D.addFeature(std::move(F)));
  }
  return D;
}

StatusOr<Dataset>
Dataset::synthetic(const std::vector<FeatureRequest> &Requests,
                   int64_t NumExamples, uint64_t Seed, int64_t NumClasses) {
  if (NumExamples <= 0 || NumExamples > int64_t(UINT32_MAX))
    return Status::error("synthetic data needs 1 to 4294967295 examples, not " +
                         std::to_string(NumExamples));
  Dataset D;
  for (const FeatureRequest &R : Requests) {
    if (D.find(R.Feature))
      continue;
    Feature F;
    F.Name = R.Feature;
    F.Source = "<synthetic>";
    F.Array.Dims.push_back(uint32_t(NumExamples));
    for (int64_t Dim : R.Shape) {
      if (Dim <= 0 || Dim > int64_t(UINT32_MAX))
        return Status::error("synthetic feature " + quote(R.Feature) +
                             " has a bad shape " + shapeStr(R.Shape));
      F.Array.Dims.push_back(uint32_t(Dim));
    }
    int64_t PerExample = R.exampleElements();
    if (NumExamples > (int64_t(1) << 40) / PerExample)
      return Status::error("synthetic feature " + quote(R.Feature) +
                           " is too large: " + std::to_string(NumExamples) +
                           " examples of " + std::to_string(PerExample) +
                           " values, more than 2^40 values");
    int64_t Total = NumExamples * PerExample;
    uint64_t Stream = hashName(R.Feature.c_str());
    switch (R.Type) {
    case DType::Float32: {
      F.Array.Type = IdxType::Float32;
      F.Array.Data.resize(size_t(Total) * 4);
      float *Out = F.Array.as<float>();
      for (int64_t I = 0; I < NumExamples; ++I)
        for (int64_t E = 0; E < PerExample; ++E)
          Out[I * PerExample + E] =
              uniformRandomFloat(Seed, Stream, uint64_t(I), uint64_t(E));
      break;
    }
    case DType::Float64: {
      F.Array.Type = IdxType::Float64;
      F.Array.Data.resize(size_t(Total) * 8);
      double *Out = F.Array.as<double>();
      for (int64_t I = 0; I < NumExamples; ++I)
        for (int64_t E = 0; E < PerExample; ++E)
          Out[I * PerExample + E] =
              uniformRandom(Seed, Stream, uint64_t(I), uint64_t(E));
      break;
    }
    case DType::Int32:
    case DType::Int64: {
      int64_t Classes = R.NumClasses > 0 ? R.NumClasses : NumClasses;
      if (Classes <= 0 || Classes > int64_t(INT32_MAX))
        return Status::error("synthetic feature " + quote(R.Feature) +
                             " needs a number of classes in [1, 2147483647], "
                             "not " +
                             std::to_string(Classes));
      F.Array.Type = IdxType::Int32;
      F.Array.Data.resize(size_t(Total) * 4);
      int32_t *Out = F.Array.as<int32_t>();
      for (int64_t I = 0; I < NumExamples; ++I)
        for (int64_t E = 0; E < PerExample; ++E)
          Out[I * PerExample + E] =
              int32_t(randomBits(Seed, Stream, uint64_t(I), uint64_t(E)) %
                      uint64_t(Classes));
      break;
    }
    default:
      return Status::error("synthetic feature " + quote(R.Feature) +
                           " cannot be of type " + dtypeName(R.Type));
    }
    MDRT_RETURN_IF_ERROR(D.addFeature(std::move(F)));
  }
  return D;
}

Status Dataset::addFeature(Feature F) {
  if (F.Array.Dims.empty())
    return Status::error("feature " + quote(F.Name) + " from " +
                         quote(F.Source) + " has no examples dimension");
  if (F.Array.Data.size() != F.Array.bytes())
    return Status::error(
        "feature " + quote(F.Name) + " from " + quote(F.Source) + " has " +
        std::to_string(F.Array.Data.size()) + " bytes of data, " +
        F.Array.str() + " needs " + std::to_string(F.Array.bytes()));
  if (find(F.Name))
    return Status::error("feature " + quote(F.Name) + " is given twice (" +
                         quote(find(F.Name)->Source) + " and " +
                         quote(F.Source) + ")");
  if (!Features.empty() && F.numExamples() != Size) {
    const Feature &First = Features.front();
    return Status::error(
        "feature " + quote(F.Name) + " from " + quote(F.Source) + " has " +
        std::to_string(F.numExamples()) + " examples, but feature " +
        quote(First.Name) + " from " + quote(First.Source) + " has " +
        std::to_string(Size));
  }
  Size = F.numExamples();
  Features.push_back(std::move(F));
  return Status::ok();
}

const Feature *Dataset::find(const std::string &Name) const {
  for (const Feature &F : Features)
    if (F.Name == Name)
      return &F;
  return nullptr;
}

Status Dataset::checkRequest(const FeatureRequest &R) const {
  const Feature *F = find(R.Feature);
  if (!F) {
    std::string Have;
    for (const Feature &G : Features)
      Have += (Have.empty() ? "" : ", ") + G.Name;
    return Status::error("the dataset has no feature " + quote(R.Feature) +
                         " (it has: " + (Have.empty() ? "none" : Have) + ")");
  }
  std::string What = "feature " + quote(F->Name) + " from " + quote(F->Source);
  if (R.Type != DType::Float32 && R.Type != DType::Float64 &&
      !isIntDType(R.Type))
    return Status::error(What + " cannot feed a " + dtypeName(R.Type) +
                         " input (inputs take float32, float64, int32 or "
                         "int64)");
  for (int64_t D : R.Shape)
    if (D <= 0)
      return Status::error(What + " cannot feed an input of shape " +
                           shapeStr(R.Shape));
  TensorDesc Wanted{R.Type, R.Shape};
  if (R.exampleElements() != F->exampleElements())
    return Status::error(
        What + " has " + std::to_string(F->exampleElements()) +
        " elements per example (" + idxTypeName(F->Array.Type) +
        shapeStr(F->exampleShape()) + "), but the input wants " + Wanted.str() +
        " (" + std::to_string(R.exampleElements()) + " elements)");

  // Values that must be checked one by one: floats into integers (must be
  // integral and in range) and class labels.
  bool CheckInt = isIntDType(R.Type) && isFloatIdx(F->Array.Type);
  if (!CheckInt && R.NumClasses <= 0)
    return Status::ok();
  double Lo =
      R.Type == DType::Int32 ? double(INT32_MIN) : -9223372036854775808.0;
  // 2^63 is the first double above INT64_MAX.
  double HiExclusive =
      R.Type == DType::Int32 ? double(INT32_MAX) + 1 : 9223372036854775808.0;
  int64_t PerExample = F->exampleElements();
  int64_t Total = F->Array.numElements();
  // The message only for the value that fails (made for every value, it
  // was most of the time of a check).
  auto Where = [&](double V, int64_t I) {
    return "value " + formatValue(V) + " of example " +
           std::to_string(I / PerExample);
  };
  for (int64_t I = 0; I < Total; ++I) {
    double V = elementAsDouble(F->Array, I);
    if (CheckInt &&
        (!std::isfinite(V) || V != std::floor(V) || V < Lo || V >= HiExclusive))
      return Status::error(What + ": " + Where(V, I) + " does not fit " +
                           dtypeName(R.Type));
    if (R.NumClasses > 0 &&
        (V != std::floor(V) || V < 0 || V >= double(R.NumClasses)))
      return Status::error(What + ": " + Where(V, I) +
                           " is not a class in [0, " +
                           std::to_string(R.NumClasses) + ")");
  }
  return Status::ok();
}

void mdrt::convertExamples(const Feature &F, const FeatureRequest &R,
                           const int64_t *Indices, int64_t Count, void *Dst) {
  int64_t PerExample = F.exampleElements();
  size_t SrcRow = size_t(PerExample) * idxTypeSize(F.Array.Type);
  size_t DstRow = size_t(PerExample) * dtypeSize(R.Type);
  const uint8_t *Base = F.Array.Data.data();
  uint8_t *Out = static_cast<uint8_t *>(Dst);
  if (sameRepresentation(F.Array.Type, R.Type)) {
    for (int64_t I = 0; I < Count; ++I)
      std::memcpy(Out + I * DstRow, Base + Indices[I] * SrcRow, SrcRow);
    return;
  }
  RowFn Fn = rowFn(F.Array.Type, R.Type, R.ScaleBytes);
  assert(Fn && "request not checked");
  for (int64_t I = 0; I < Count; ++I)
    Fn(Base + Indices[I] * SrcRow, Out + I * DstRow, PerExample);
}

//===----------------------------------------------------------------------===//
// Batches
//===----------------------------------------------------------------------===//

std::string DataPosition::str() const {
  return "epoch " + std::to_string(Epoch) + ", index " + std::to_string(Index);
}

std::vector<uint32_t> mdrt::shufflePermutation(int64_t N, uint64_t Seed,
                                               int64_t Epoch) {
  static const uint64_t Stream = hashName("mdrt.data.shuffle");
  std::vector<uint32_t> P(size_t(std::max<int64_t>(N, 0)));
  for (size_t I = 0; I < P.size(); ++I)
    P[I] = uint32_t(I);
  // Fisher-Yates from the back; j = floor(bits * (i + 1) / 2^64) is uniform
  // in [0, i] up to a bias below 2^-32.
  for (int64_t I = N - 1; I > 0; --I) {
    uint64_t Bits = randomBits(Seed, Stream, uint64_t(Epoch), uint64_t(I));
    uint64_t J = uint64_t((unsigned __int128)Bits * uint64_t(I + 1) >> 64);
    std::swap(P[size_t(I)], P[size_t(J)]);
  }
  return P;
}

class BatchIterator::Impl {
public:
  std::shared_ptr<const Dataset> Data;
  std::vector<FeatureRequest> Requests;
  std::vector<const Feature *> Features;
  BatchOptions Opts;
  int64_t N = 0, B = 0, RowBegin = 0, RowEnd = 0;

  /// The example order of one epoch, kept by each producing thread.
  struct OrderCache {
    int64_t Epoch = -1;
    std::vector<uint32_t> Order;
  };

  /// The consumer's position: that of the batch next() returns next.
  DataPosition Current;

  // Producing on the caller's thread (Prefetch == 0).
  OrderCache SyncCache;
  std::vector<int64_t> SyncScratch;

  // Prefetch. Slots cycle Free -> (filled by the worker) -> Ready ->
  // (copied out by next()) -> Free. Each slot is owned by one thread at a
  // time, so only the queues and the producer's position need the lock.
  struct Slot {
    std::vector<std::vector<uint8_t>> Buffers;
    std::vector<void *> Pointers;
    BatchInfo Info;
  };
  std::vector<Slot> Slots;
  std::deque<size_t> Free, Ready;
  std::mutex Mu;
  std::condition_variable ProducerCV, ConsumerCV;
  bool Stop = false;
  /// Bumped by seek(); a batch started under an older generation is dropped.
  uint64_t Generation = 0;
  DataPosition ProducerPos;
  std::thread Worker;

  ~Impl() { stopWorker(); }

  void stopWorker() {
    if (!Worker.joinable())
      return;
    {
      std::lock_guard<std::mutex> L(Mu);
      Stop = true;
    }
    ProducerCV.notify_all();
    Worker.join();
  }

  int64_t rows() const { return RowEnd - RowBegin; }

  int64_t batchesPerEpoch() const {
    return Opts.Last == LastBatch::Drop ? N / B : (N + B - 1) / B;
  }

  DataPosition advance(DataPosition P) const {
    int64_t Next = P.Index + B;
    bool EpochDone = Opts.Last == LastBatch::Drop ? Next + B > N : Next >= N;
    if (EpochDone)
      return DataPosition{P.Epoch + 1, 0};
    return DataPosition{P.Epoch, Next};
  }

  Status checkPosition(DataPosition P) const {
    if (P.Epoch < 0 || P.Index < 0 || P.Index >= N ||
        (Opts.Last == LastBatch::Drop && P.Index + B > N))
      return Status::error("data position (" + P.str() +
                           ") is not the start of a batch of " +
                           std::to_string(B) + " in a dataset of " +
                           std::to_string(N) + " examples");
    return Status::ok();
  }

  /// Fills one batch at \p P into \p Dst.
  BatchInfo produce(DataPosition P, OrderCache &Cache,
                    std::vector<int64_t> &Indices, void *const *Dst) const {
    const uint32_t *Order = nullptr;
    if (Opts.Shuffle) {
      if (Cache.Epoch != P.Epoch) {
        Cache.Order = shufflePermutation(N, Opts.Seed, P.Epoch);
        Cache.Epoch = P.Epoch;
      }
      Order = Cache.Order.data();
    }
    BatchInfo Info;
    Info.Position = P;
    Indices.resize(size_t(rows()));
    for (int64_t R = RowBegin; R < RowEnd; ++R) {
      int64_t K = P.Index + R;
      if (K < N)
        ++Info.Valid;
      else
        K = N - 1; // Padding repeats the epoch's last example.
      Indices[size_t(R - RowBegin)] = Order ? int64_t(Order[K]) : K;
    }
    if (Info.Valid < rows())
      Info.PaddingExample = Indices.back();
    Info.EndOfEpoch = advance(P).Epoch != P.Epoch;
    for (size_t I = 0; I < Requests.size(); ++I)
      convertExamples(*Features[I], Requests[I], Indices.data(), rows(),
                      Dst[I]);
    return Info;
  }

  void workerLoop() {
    OrderCache Cache;
    std::vector<int64_t> Scratch;
    std::unique_lock<std::mutex> L(Mu);
    while (true) {
      ProducerCV.wait(L, [&] { return Stop || !Free.empty(); });
      if (Stop)
        return;
      size_t S = Free.front();
      Free.pop_front();
      uint64_t Gen = Generation;
      DataPosition P = ProducerPos;
      ProducerPos = advance(P);
      L.unlock();
      Slots[S].Info = produce(P, Cache, Scratch, Slots[S].Pointers.data());
      L.lock();
      if (Gen == Generation) {
        Ready.push_back(S);
        ConsumerCV.notify_one();
      } else {
        Free.push_back(S);
      }
    }
  }

  Status startWorker() {
    // The slots' memory, checked before any is allocated: a deep prefetch
    // of large batches is a user's mistake, not an internal error.
    MDRT_RETURN_IF_ERROR(checkPrefetch(Requests, rows(), Opts.Prefetch));
    auto CannotAllocate = [&](const std::string &Why) {
      return Status::error("cannot allocate " + std::to_string(Opts.Prefetch) +
                           " prefetched batches" + Why);
    };
    try {
      Slots.resize(size_t(Opts.Prefetch));
      for (size_t S = 0; S < Slots.size(); ++S) {
        for (size_t I = 0; I < Requests.size(); ++I) {
          Slots[S].Buffers.emplace_back(size_t(rows()) *
                                        Requests[I].exampleBytes());
          Slots[S].Pointers.push_back(Slots[S].Buffers.back().data());
        }
        Free.push_back(S);
      }
    } catch (const std::bad_alloc &) {
      Slots.clear();
      Free.clear();
      return CannotAllocate("");
    }
    ProducerPos = Current;
    try {
      Worker = std::thread([this] { workerLoop(); });
    } catch (const std::system_error &E) {
      return Status::error(std::string("cannot start the prefetch thread: ") +
                           E.what());
    }
    return Status::ok();
  }

  BatchInfo next(void *const *Dst) {
    if (!Worker.joinable()) {
      BatchInfo Info = produce(Current, SyncCache, SyncScratch, Dst);
      Current = advance(Current);
      return Info;
    }
    std::unique_lock<std::mutex> L(Mu);
    ConsumerCV.wait(L, [&] { return !Ready.empty(); });
    size_t S = Ready.front();
    Ready.pop_front();
    L.unlock();
    Slot &Sl = Slots[S];
    assert(Sl.Info.Position == Current && "prefetched batches out of order");
    for (size_t I = 0; I < Requests.size(); ++I)
      std::memcpy(Dst[I], Sl.Buffers[I].data(), Sl.Buffers[I].size());
    BatchInfo Info = Sl.Info;
    L.lock();
    Free.push_back(S);
    L.unlock();
    ProducerCV.notify_one();
    Current = advance(Info.Position);
    return Info;
  }

  Status seek(DataPosition P) {
    MDRT_RETURN_IF_ERROR(checkPosition(P));
    Current = P;
    if (Worker.joinable()) {
      {
        std::lock_guard<std::mutex> L(Mu);
        ++Generation;
        for (size_t S : Ready)
          Free.push_back(S);
        Ready.clear();
        ProducerPos = P;
      }
      ProducerCV.notify_one();
    }
    return Status::ok();
  }
};

Status BatchIterator::checkPrefetch(const std::vector<FeatureRequest> &Requests,
                                    int64_t Rows, int Prefetch) {
  uint64_t BatchBytes = 0, Total = 0;
  for (const FeatureRequest &R : Requests)
    BatchBytes += uint64_t(Rows) * uint64_t(R.exampleBytes());
  auto CannotAllocate = [&](const std::string &Why) {
    return Status::error(
        "cannot allocate " + std::to_string(Prefetch) +
        " prefetched batches of " + std::to_string(BatchBytes) + " bytes" +
        (Total ? " (" + std::to_string(Total) + " bytes)" : std::string()) +
        Why);
  };
  // Each slot's own bookkeeping counts too.
  constexpr uint64_t SlotBytes = 128;
  if (__builtin_mul_overflow(BatchBytes + SlotBytes, uint64_t(Prefetch),
                             &Total) ||
      Total > uint64_t(PTRDIFF_MAX)) {
    Total = 0; // Not a number worth printing.
    return CannotAllocate(": more than 2^63 bytes");
  }
  // More than the process may have would be killed for it, not refused.
  if (uint64_t Limit = memoryLimit(); Limit && Total > Limit)
    return CannotAllocate(": more than the machine's memory (" +
                          std::to_string(Limit) + " bytes)");
  return Status::ok();
}

StatusOr<std::unique_ptr<BatchIterator>>
BatchIterator::create(std::shared_ptr<const Dataset> Data,
                      std::vector<FeatureRequest> Requests,
                      const BatchOptions &Options) {
  if (!Data || Data->size() == 0)
    return Status::error("batches of an empty dataset");
  if (Requests.empty())
    return Status::error("batches with no features requested");
  const BatchOptions &O = Options;
  int64_t N = Data->size();
  if (O.BatchSize <= 0)
    return Status::error("bad batch size " + std::to_string(O.BatchSize));
  if (O.Last == LastBatch::Drop && N < O.BatchSize)
    return Status::error("the dataset has " + std::to_string(N) +
                         " examples, fewer than one batch of " +
                         std::to_string(O.BatchSize) +
                         " (training drops partial batches)");
  if (O.NumShards <= 0 || O.ShardIndex < 0 || O.ShardIndex >= O.NumShards)
    return Status::error("bad shard " + std::to_string(O.ShardIndex) + " of " +
                         std::to_string(O.NumShards));
  if (O.BatchSize % O.NumShards != 0)
    return Status::error("the batch size " + std::to_string(O.BatchSize) +
                         " is not a multiple of the " +
                         std::to_string(O.NumShards) + " shards");
  if (O.Prefetch < 0)
    return Status::error("bad prefetch depth " + std::to_string(O.Prefetch));
  for (const FeatureRequest &R : Requests)
    MDRT_RETURN_IF_ERROR(Data->checkRequest(R));

  auto I = std::make_unique<Impl>();
  I->Opts = O;
  I->N = N;
  I->B = O.BatchSize;
  int64_t ShardRows = O.BatchSize / O.NumShards;
  I->RowBegin = O.ShardIndex * ShardRows;
  I->RowEnd = I->RowBegin + ShardRows;
  for (const FeatureRequest &R : Requests)
    I->Features.push_back(Data->find(R.Feature));
  I->Data = std::move(Data);
  I->Requests = std::move(Requests);
  MDRT_RETURN_IF_ERROR(
      I->checkPosition(O.Start).withContext("bad start position"));
  I->Current = O.Start;
  if (O.Prefetch > 0)
    MDRT_RETURN_IF_ERROR(I->startWorker());
  return std::unique_ptr<BatchIterator>(new BatchIterator(std::move(I)));
}

BatchIterator::BatchIterator(std::unique_ptr<Impl> I) : P(std::move(I)) {}
BatchIterator::~BatchIterator() = default;

BatchInfo BatchIterator::next(void *const *Dst) { return P->next(Dst); }

void BatchIterator::fillPadding(const BatchInfo &Info, void *const *Dst) const {
  assert(Info.PaddingExample >= 0 && "the batch has no padding");
  std::vector<int64_t> Indices(size_t(P->rows()), Info.PaddingExample);
  for (size_t I = 0; I < P->Requests.size(); ++I)
    convertExamples(*P->Features[I], P->Requests[I], Indices.data(), P->rows(),
                    Dst[I]);
}

DataPosition BatchIterator::position() const { return P->Current; }
Status BatchIterator::seek(DataPosition Pos) { return P->seek(Pos); }
int64_t BatchIterator::rows() const { return P->rows(); }
size_t BatchIterator::batchBytes(size_t I) const {
  return size_t(P->rows()) * P->Requests[I].exampleBytes();
}
int64_t BatchIterator::batchesPerEpoch() const { return P->batchesPerEpoch(); }
const std::vector<FeatureRequest> &BatchIterator::requests() const {
  return P->Requests;
}
const BatchOptions &BatchIterator::options() const { return P->Opts; }
