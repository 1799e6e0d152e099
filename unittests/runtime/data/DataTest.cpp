//===- DataTest.cpp - IDX files, datasets and batch iteration -------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//

#include "mdrt/Data.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

using namespace mdrt;
namespace fs = std::filesystem;

namespace {

const char *FashionDir = "/usr/share/datasets/fashion-mnist";

/// A fresh temporary directory, removed at the end of the test.
class TempDir {
public:
  TempDir() {
    std::string Tmpl =
        (fs::temp_directory_path() / "mdrt-data-test-XXXXXX").string();
    std::vector<char> Buf(Tmpl.begin(), Tmpl.end());
    Buf.push_back('\0');
    const char *P = mkdtemp(Buf.data());
    EXPECT_NE(P, nullptr);
    Path = P ? P : "";
  }
  ~TempDir() {
    std::error_code EC;
    fs::remove_all(Path, EC);
  }
  std::string file(const std::string &Name) const { return Path + "/" + Name; }
  std::string Path;
};

template <typename T>
IdxArray makeArray(IdxType Type, std::vector<uint32_t> Dims,
                   const std::vector<T> &Values) {
  IdxArray A;
  A.Type = Type;
  A.Dims = std::move(Dims);
  EXPECT_EQ(sizeof(T), idxTypeSize(Type));
  EXPECT_EQ(int64_t(Values.size()), A.numElements());
  A.Data.resize(Values.size() * sizeof(T));
  std::memcpy(A.Data.data(), Values.data(), A.Data.size());
  return A;
}

void writeBytes(const std::string &Path, const std::vector<uint8_t> &Bytes) {
  std::ofstream Out(Path, std::ios::binary);
  Out.write(reinterpret_cast<const char *>(Bytes.data()),
            std::streamsize(Bytes.size()));
}

std::vector<uint8_t> readBytes(const std::string &Path) {
  std::ifstream In(Path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(In), {});
}

/// The error message of \p S, or "<ok>".
template <typename T> std::string errorOf(const StatusOr<T> &S) {
  return S.isOk() ? "<ok>" : S.status().message();
}
std::string errorOf(const Status &S) { return S.isOk() ? "<ok>" : S.message(); }

#define EXPECT_ERROR_HAS(Expr, Needle)                                         \
  EXPECT_NE(errorOf(Expr).find(Needle), std::string::npos)                     \
      << "message: " << errorOf(Expr) << "\nexpected to contain: " << (Needle)

//===----------------------------------------------------------------------===//
// IDX
//===----------------------------------------------------------------------===//

template <typename T>
void roundTrip(IdxType Type, const std::vector<T> &Values, bool Gzip) {
  SCOPED_TRACE(std::string(idxTypeName(Type)) + (Gzip ? " gzip" : " raw"));
  TempDir Dir;
  uint32_t N = uint32_t(Values.size());
  IdxArray A = makeArray<T>(Type, {N / 2, 2}, Values);
  std::string Path = Dir.file(Gzip ? "a.gz" : "a");
  ASSERT_TRUE(writeIdxFile(Path, A, Gzip).isOk());
  std::vector<uint8_t> OnDisk = readBytes(Path);
  ASSERT_GE(OnDisk.size(), 2u);
  EXPECT_EQ(OnDisk[0] == 0x1f && OnDisk[1] == 0x8b, Gzip);
  StatusOr<IdxArray> B = readIdxFile(Path);
  ASSERT_TRUE(B.isOk()) << errorOf(B);
  EXPECT_EQ(B->Type, Type);
  EXPECT_EQ(B->Dims, A.Dims);
  ASSERT_EQ(B->Data.size(), A.Data.size());
  for (size_t I = 0; I < Values.size(); ++I)
    EXPECT_EQ(B->as<T>()[I], Values[I]) << "element " << I;
}

TEST(IdxTest, RoundTripEveryType) {
  for (bool Gzip : {false, true}) {
    roundTrip<uint8_t>(IdxType::UInt8, {0, 1, 127, 128, 254, 255}, Gzip);
    roundTrip<int8_t>(IdxType::Int8, {-128, -1, 0, 1, 100, 127}, Gzip);
    roundTrip<int16_t>(IdxType::Int16, {-32768, -2, 0, 258, 1000, 32767}, Gzip);
    roundTrip<int32_t>(IdxType::Int32,
                       {INT32_MIN, -70000, 0, 1, 16909060, INT32_MAX}, Gzip);
    roundTrip<float>(IdxType::Float32,
                     {-1.5f, 0.0f, 1e-30f, 3.25f, 1e30f, -0.0f}, Gzip);
    roundTrip<double>(IdxType::Float64, {-1.5, 0.0, 1e-300, 3.25, 1e300, 0.1},
                      Gzip);
  }
}

TEST(IdxTest, BigEndianLayout) {
  // Hand-encoded: int16, 1 dim of 2: 0x0102, -2.
  std::vector<uint8_t> Bytes = {0, 0, 0x0B, 1,    0,    0,
                                0, 2, 0x01, 0x02, 0xFF, 0xFE};
  StatusOr<IdxArray> A = parseIdx(Bytes.data(), Bytes.size(), "x");
  ASSERT_TRUE(A.isOk()) << errorOf(A);
  EXPECT_EQ(A->Type, IdxType::Int16);
  EXPECT_EQ(A->Dims, std::vector<uint32_t>{2});
  EXPECT_EQ(A->as<int16_t>()[0], 0x0102);
  EXPECT_EQ(A->as<int16_t>()[1], -2);
  EXPECT_EQ(encodeIdx(*A), Bytes);
  EXPECT_EQ(A->str(), "int16[2]");
}

TEST(IdxTest, WriteChecksTheArray) {
  TempDir Dir;
  IdxArray NoDims;
  NoDims.Type = IdxType::UInt8;
  EXPECT_EQ(errorOf(writeIdxFile(Dir.file("a"), NoDims, false)),
            "cannot write '" + Dir.file("a") +
                "': an idx array has 1 to 255 dims, this one has 0");
  IdxArray Short = makeArray<int32_t>(IdxType::Int32, {3}, {1, 2, 3});
  Short.Data.pop_back();
  EXPECT_EQ(errorOf(writeIdxFile(Dir.file("b"), Short, true)),
            "cannot write '" + Dir.file("b") +
                "': int32[3] needs 12 bytes of data, it has 11");
}

TEST(IdxTest, Errors) {
  TempDir Dir;
  IdxArray A = makeArray<int32_t>(IdxType::Int32, {3, 2}, {1, 2, 3, 4, 5, 6});
  std::vector<uint8_t> Good = encodeIdx(A);
  ASSERT_EQ(Good.size(), 4u + 8 + 24);

  EXPECT_ERROR_HAS(readIdxFile(Dir.file("missing")),
                   "cannot open '" + Dir.file("missing") +
                       "': No such file or directory");

  std::vector<uint8_t> Short(Good.begin(), Good.end() - 1);
  writeBytes(Dir.file("short"), Short);
  EXPECT_ERROR_HAS(readIdxFile(Dir.file("short")),
                   "idx file '" + Dir.file("short") +
                       "' is truncated: the header says int32[3,2], 24 "
                       "bytes of data, but it has 23");

  std::vector<uint8_t> HeaderCut(Good.begin(), Good.begin() + 6);
  EXPECT_ERROR_HAS(parseIdx(HeaderCut.data(), HeaderCut.size(), "h"),
                   "idx file 'h' is truncated: its header needs 12 bytes, it "
                   "has 6");
  EXPECT_ERROR_HAS(parseIdx(Good.data(), 2, "tiny"),
                   "idx file 'tiny' is truncated: 2 bytes");

  for (auto [Pos, Value] : std::vector<std::pair<int, uint8_t>>{
           {0, 1}, {1, 8}, {2, 0x0A}, {2, 0x0F}, {3, 0}}) {
    std::vector<uint8_t> Bad = Good;
    Bad[size_t(Pos)] = Value;
    EXPECT_ERROR_HAS(parseIdx(Bad.data(), Bad.size(), "m"),
                     "idx file 'm' has a bad magic number");
  }
  // A text file is not an idx file.
  writeBytes(Dir.file("text"), {'h', 'e', 'l', 'l', 'o', '\n'});
  EXPECT_ERROR_HAS(readIdxFile(Dir.file("text")),
                   "has a bad magic number 0x68656c6c");

  std::vector<uint8_t> Long = Good;
  Long.push_back(0);
  EXPECT_ERROR_HAS(parseIdx(Long.data(), Long.size(), "l"),
                   "idx file 'l' is corrupt: 1 bytes follow the int32[3,2] "
                   "data");

  // Dimensions whose product is beyond 2^48 elements, also when another
  // dimension is 0 (the array is empty, but an example would not be).
  auto Header = [](std::vector<uint32_t> Dims) {
    std::vector<uint8_t> B = {0, 0, 0x08, uint8_t(Dims.size())};
    for (uint32_t D : Dims)
      for (int Shift = 24; Shift >= 0; Shift -= 8)
        B.push_back(uint8_t(D >> Shift));
    return B;
  };
  std::vector<uint8_t> Huge = Header({65536, 65536, 65537});
  EXPECT_ERROR_HAS(parseIdx(Huge.data(), Huge.size(), "big"),
                   "idx file 'big' is corrupt: ubyte[65536,65536,65537]... "
                   "is too large");
  std::vector<uint8_t> Empty = Header({0, 65536, 65536, 65537});
  EXPECT_ERROR_HAS(parseIdx(Empty.data(), Empty.size(), "empty"),
                   "idx file 'empty' is corrupt: ubyte[0,65536,65536,65537]"
                   "... is too large");
}

TEST(IdxTest, GzipErrors) {
  TempDir Dir;
  std::vector<uint8_t> Values(5000);
  for (size_t I = 0; I < Values.size(); ++I)
    Values[I] = uint8_t(I * 7 + I / 13);
  IdxArray A = makeArray<uint8_t>(IdxType::UInt8, {50, 100}, Values);
  ASSERT_TRUE(writeIdxFile(Dir.file("a.gz"), A, true).isOk());
  std::vector<uint8_t> Gz = readBytes(Dir.file("a.gz"));
  ASSERT_GT(Gz.size(), 40u);

  // Truncated at several points: never accepted, and said so.
  for (size_t Cut :
       {size_t(3), size_t(12), Gz.size() / 2, Gz.size() - 5, Gz.size() - 1}) {
    std::vector<uint8_t> T(Gz.begin(), Gz.begin() + long(Cut));
    writeBytes(Dir.file("t.gz"), T);
    EXPECT_ERROR_HAS(readIdxFile(Dir.file("t.gz")),
                     "gzip file '" + Dir.file("t.gz") + "' is truncated")
        << "cut at " << Cut;
  }
  // A damaged byte in the compressed data or the trailer's CRC.
  for (size_t Pos : {Gz.size() / 2, Gz.size() - 6}) {
    std::vector<uint8_t> C = Gz;
    C[Pos] ^= 0x55;
    writeBytes(Dir.file("c.gz"), C);
    EXPECT_ERROR_HAS(readIdxFile(Dir.file("c.gz")), "gzip error in '")
        << "byte " << Pos;
  }
  // Two members concatenated decode as one stream: here the idx header says
  // less than the data, so it is an idx error (not a gzip one).
  std::vector<uint8_t> Twice = Gz;
  Twice.insert(Twice.end(), Gz.begin(), Gz.end());
  writeBytes(Dir.file("twice.gz"), Twice);
  EXPECT_ERROR_HAS(readIdxFile(Dir.file("twice.gz")),
                   "is corrupt: 5012 bytes follow the ubyte[50,100] data");
  std::vector<uint8_t> Garbage = Gz;
  Garbage.push_back('x');
  writeBytes(Dir.file("garbage.gz"), Garbage);
  EXPECT_ERROR_HAS(readIdxFile(Dir.file("garbage.gz")),
                   "has 1 bytes of trailing garbage");
}

//===----------------------------------------------------------------------===//
// Datasets
//===----------------------------------------------------------------------===//

std::vector<float> iota(size_t N, float Scale = 1) {
  std::vector<float> V(N);
  for (size_t I = 0; I < N; ++I)
    V[I] = float(I) * Scale;
  return V;
}

TEST(DatasetTest, DirectoryConvention) {
  TempDir Dir;
  ASSERT_TRUE(writeIdxFile(Dir.file("train-x-idx2-ubyte"),
                           makeArray<float>(IdxType::Float32, {4, 3}, iota(12)))
                  .isOk());
  std::vector<uint8_t> Labels = {3, 1, 4, 1};
  ASSERT_TRUE(writeIdxFile(Dir.file("train-labels-idx1-ubyte.gz"),
                           makeArray<uint8_t>(IdxType::UInt8, {4}, Labels),
                           true)
                  .isOk());
  // Other splits and other files are ignored.
  ASSERT_TRUE(writeIdxFile(Dir.file("t10k-x-idx2-ubyte"),
                           makeArray<float>(IdxType::Float32, {2, 3}, iota(6)))
                  .isOk());
  writeBytes(Dir.file("README"), {'h', 'i'});

  StatusOr<std::string> P = findFeatureFile(Dir.Path, "train", "label");
  ASSERT_TRUE(P.isOk()) << errorOf(P);
  EXPECT_EQ(*P, Dir.file("train-labels-idx1-ubyte.gz"));
  P = findFeatureFile(Dir.Path, "train", "x");
  ASSERT_TRUE(P.isOk()) << errorOf(P);
  EXPECT_EQ(*P, Dir.file("train-x-idx2-ubyte"));

  StatusOr<Dataset> D = Dataset::load(Dir.Path, "train", {"x", "label"});
  ASSERT_TRUE(D.isOk()) << errorOf(D);
  EXPECT_EQ(D->size(), 4);
  ASSERT_EQ(D->features().size(), 2u);
  EXPECT_EQ(D->features()[0].Name, "x");
  EXPECT_EQ(D->features()[0].exampleShape(), std::vector<int64_t>{3});
  EXPECT_EQ(D->find("label")->exampleShape(), std::vector<int64_t>{});
  EXPECT_EQ(D->find("label")->exampleElements(), 1);
  EXPECT_EQ(D->find("nope"), nullptr);

  // Discovery: every feature of the split, "labels" named "label".
  StatusOr<Dataset> All = Dataset::load(Dir.Path, "train");
  ASSERT_TRUE(All.isOk()) << errorOf(All);
  ASSERT_EQ(All->features().size(), 2u);
  EXPECT_EQ(All->features()[0].Name, "label");
  EXPECT_EQ(All->features()[1].Name, "x");
  StatusOr<Dataset> Test = Dataset::load(Dir.Path, "t10k");
  ASSERT_TRUE(Test.isOk()) << errorOf(Test);
  EXPECT_EQ(Test->size(), 2);

  // Explicit files.
  StatusOr<Dataset> E =
      Dataset::loadFiles({{"pixels", Dir.file("t10k-x-idx2-ubyte")}});
  ASSERT_TRUE(E.isOk()) << errorOf(E);
  EXPECT_EQ(E->features()[0].Name, "pixels");
  EXPECT_EQ(E->features()[0].Source, Dir.file("t10k-x-idx2-ubyte"));

  // A raw file is preferred to its gzipped twin.
  ASSERT_TRUE(writeIdxFile(Dir.file("train-labels-idx1-ubyte"),
                           makeArray<uint8_t>(IdxType::UInt8, {4}, Labels))
                  .isOk());
  P = findFeatureFile(Dir.Path, "train", "label");
  ASSERT_TRUE(P.isOk()) << errorOf(P);
  EXPECT_EQ(*P, Dir.file("train-labels-idx1-ubyte"));
}

TEST(DatasetTest, DirectoryErrors) {
  TempDir Dir;
  EXPECT_ERROR_HAS(Dataset::load(Dir.file("nodir"), "train", {"image"}),
                   "cannot read dataset directory '" + Dir.file("nodir") + "'");
  EXPECT_ERROR_HAS(Dataset::load(Dir.Path, "train", {"image"}),
                   "no file for feature 'image' of split 'train' in '" +
                       Dir.Path +
                       "' (looked for train-images-idx*-ubyte[.gz] and "
                       "train-image-idx*-ubyte[.gz])");
  EXPECT_ERROR_HAS(Dataset::load(Dir.Path, "train"),
                   "no idx files of split 'train'");
  EXPECT_ERROR_HAS(Dataset::loadFiles({{"x", Dir.file("gone")}}),
                   "loading feature 'x': cannot open '" + Dir.file("gone") +
                       "': No such file or directory");

  // Feature count mismatch.
  ASSERT_TRUE(writeIdxFile(Dir.file("train-x-idx2-ubyte"),
                           makeArray<float>(IdxType::Float32, {4, 3}, iota(12)))
                  .isOk());
  ASSERT_TRUE(writeIdxFile(Dir.file("train-labels-idx1-ubyte"),
                           makeArray<uint8_t>(IdxType::UInt8, {3}, {1, 2, 3}))
                  .isOk());
  EXPECT_ERROR_HAS(Dataset::load(Dir.Path, "train", {"x", "label"}),
                   "feature 'label' from '" +
                       Dir.file("train-labels-idx1-ubyte") +
                       "' has 3 examples, but feature 'x' from '" +
                       Dir.file("train-x-idx2-ubyte") + "' has 4");

  // A truncated file, named in the message with its feature.
  std::vector<uint8_t> Bytes = readBytes(Dir.file("train-x-idx2-ubyte"));
  Bytes.resize(Bytes.size() - 4);
  writeBytes(Dir.file("train-x-idx2-ubyte"), Bytes);
  EXPECT_ERROR_HAS(Dataset::load(Dir.Path, "train", {"x"}),
                   "loading feature 'x': idx file '" +
                       Dir.file("train-x-idx2-ubyte") +
                       "' is truncated: the header says float32[4,3], 48 "
                       "bytes of data, but it has 44");

  // Two different files for one feature.
  ASSERT_TRUE(
      writeIdxFile(Dir.file("train-label-idx2-ubyte"),
                   makeArray<uint8_t>(IdxType::UInt8, {3, 1}, {1, 2, 3}))
          .isOk());
  EXPECT_ERROR_HAS(Dataset::load(Dir.Path, "train", {"label"}),
                   "feature 'label' is ambiguous in '" + Dir.Path +
                       "': both 'train-label-idx2-ubyte' and "
                       "'train-labels-idx1-ubyte' match");

  // One feature loaded from two files.
  std::string A = Dir.file("train-labels-idx1-ubyte");
  std::string B = Dir.file("train-label-idx2-ubyte");
  EXPECT_EQ(errorOf(Dataset::loadFiles({{"y", A}, {"y", B}})),
            "feature 'y' is given twice ('" + A + "' and '" + B + "')");
}

TEST(DatasetTest, ShapesMatchByElementCount) {
  Dataset D;
  Feature F;
  F.Name = "image";
  F.Source = "mem";
  F.Array = makeArray<uint8_t>(IdxType::UInt8, {2, 28, 28},
                               std::vector<uint8_t>(2 * 784, 7));
  ASSERT_TRUE(D.addFeature(std::move(F)).isOk());
  EXPECT_TRUE(D.checkRequest({"image", DType::Float32, {784}}).isOk());
  EXPECT_TRUE(D.checkRequest({"image", DType::Float32, {28, 28, 1}}).isOk());
  EXPECT_TRUE(D.checkRequest({"image", DType::Float64, {28, 28}}).isOk());
  EXPECT_ERROR_HAS(D.checkRequest({"image", DType::Float32, {10}}),
                   "feature 'image' from 'mem' has 784 elements per example "
                   "(ubyte[28,28]), but the input wants float32[10] (10 "
                   "elements)");
  EXPECT_ERROR_HAS(D.checkRequest({"label", DType::Int32, {}}),
                   "the dataset has no feature 'label' (it has: image)");
  EXPECT_ERROR_HAS(D.checkRequest({"image", DType::Bool, {784}}),
                   "cannot feed a bool input");
  EXPECT_ERROR_HAS(D.checkRequest({"image", DType::Float32, {-1, 784}}),
                   "cannot feed an input of shape [-1,784]");

  Feature Twice;
  Twice.Name = "image";
  Twice.Source = "other";
  Twice.Array = makeArray<uint8_t>(IdxType::UInt8, {2}, {1, 2});
  EXPECT_EQ(errorOf(D.addFeature(Twice)),
            "feature 'image' is given twice ('mem' and 'other')");

  // A scalar has no examples (IDX files have at least one dimension).
  Feature Scalar;
  Scalar.Name = "s";
  Scalar.Source = "mem";
  Scalar.Array = makeArray<float>(IdxType::Float32, {}, {1.0f});
  EXPECT_EQ(errorOf(D.addFeature(Scalar)),
            "feature 's' from 'mem' has no examples dimension");
}

Dataset oneFeature(const std::string &Name, IdxArray A) {
  Dataset D;
  Feature F;
  F.Name = Name;
  F.Source = "mem";
  F.Array = std::move(A);
  EXPECT_TRUE(D.addFeature(std::move(F)).isOk());
  return D;
}

template <typename D>
std::vector<D> convertAll(const Dataset &Data, const FeatureRequest &R) {
  EXPECT_TRUE(Data.checkRequest(R).isOk()) << errorOf(Data.checkRequest(R));
  std::vector<int64_t> Idx(size_t(Data.size()));
  for (size_t I = 0; I < Idx.size(); ++I)
    Idx[I] = int64_t(I);
  const Feature &F = *Data.find(R.Feature);
  std::vector<D> Out(size_t(Data.size() * F.exampleElements()));
  convertExamples(F, R, Idx.data(), int64_t(Idx.size()), Out.data());
  return Out;
}

TEST(DatasetTest, Conversion) {
  Dataset Bytes =
      oneFeature("b", makeArray<uint8_t>(IdxType::UInt8, {3}, {0, 51, 255}));
  EXPECT_EQ(convertAll<float>(Bytes, {"b", DType::Float32, {}}),
            (std::vector<float>{0.0f, 0.2f, 1.0f}));
  EXPECT_EQ(convertAll<double>(Bytes, {"b", DType::Float64, {1}}),
            (std::vector<double>{0.0, 0.2, 1.0}));
  FeatureRequest Unscaled{"b", DType::Float32, {}};
  Unscaled.ScaleBytes = false;
  EXPECT_EQ(convertAll<float>(Bytes, Unscaled),
            (std::vector<float>{0.0f, 51.0f, 255.0f}));
  EXPECT_EQ(convertAll<int32_t>(Bytes, {"b", DType::Int32, {}}),
            (std::vector<int32_t>{0, 51, 255}));
  EXPECT_EQ(convertAll<int64_t>(Bytes, {"b", DType::Int64, {}}),
            (std::vector<int64_t>{0, 51, 255}));

  // Other integers are not scaled.
  Dataset Shorts =
      oneFeature("s", makeArray<int16_t>(IdxType::Int16, {3}, {-300, 0, 300}));
  EXPECT_EQ(convertAll<float>(Shorts, {"s", DType::Float32, {}}),
            (std::vector<float>{-300, 0, 300}));
  EXPECT_EQ(convertAll<int64_t>(Shorts, {"s", DType::Int64, {}}),
            (std::vector<int64_t>{-300, 0, 300}));
  Dataset SBytes =
      oneFeature("c", makeArray<int8_t>(IdxType::Int8, {2}, {-128, 127}));
  EXPECT_EQ(convertAll<float>(SBytes, {"c", DType::Float32, {}}),
            (std::vector<float>{-128, 127}));
  Dataset Ints = oneFeature(
      "i", makeArray<int32_t>(IdxType::Int32, {2}, {INT32_MIN, INT32_MAX}));
  EXPECT_EQ(convertAll<int32_t>(Ints, {"i", DType::Int32, {}}),
            (std::vector<int32_t>{INT32_MIN, INT32_MAX}));
  EXPECT_EQ(convertAll<int64_t>(Ints, {"i", DType::Int64, {}}),
            (std::vector<int64_t>{INT32_MIN, INT32_MAX}));

  Dataset Floats = oneFeature(
      "f", makeArray<float>(IdxType::Float32, {2, 2}, {0.1f, -2, 3, 1e20f}));
  EXPECT_EQ(convertAll<double>(Floats, {"f", DType::Float64, {2}}),
            (std::vector<double>{double(0.1f), -2, 3, double(1e20f)}));
  EXPECT_EQ(convertAll<float>(Floats, {"f", DType::Float32, {2, 1}}),
            (std::vector<float>{0.1f, -2, 3, 1e20f}));
  Dataset Doubles =
      oneFeature("d", makeArray<double>(IdxType::Float64, {2}, {0.1, 1e300}));
  std::vector<float> Narrowed =
      convertAll<float>(Doubles, {"d", DType::Float32, {}});
  EXPECT_EQ(Narrowed[0], 0.1f);
  EXPECT_TRUE(std::isinf(Narrowed[1]));

  // Integral floats can feed integer inputs.
  Dataset FloatLabels =
      oneFeature("l", makeArray<float>(IdxType::Float32, {3}, {0, 9, 3}));
  EXPECT_EQ(convertAll<int32_t>(FloatLabels, {"l", DType::Int32, {}}),
            (std::vector<int32_t>{0, 9, 3}));
}

TEST(DatasetTest, ValuesThatDoNotFit) {
  Dataset Half = oneFeature(
      "label", makeArray<float>(IdxType::Float32, {3}, {1, 1.5f, 2}));
  EXPECT_ERROR_HAS(Half.checkRequest({"label", DType::Int32, {}}),
                   "feature 'label' from 'mem': value 1.5 of example 1 does "
                   "not fit int32");
  Dataset Big =
      oneFeature("label", makeArray<double>(IdxType::Float64, {2}, {1, 3e9}));
  EXPECT_ERROR_HAS(Big.checkRequest({"label", DType::Int32, {}}),
                   "value 3000000000 of example 1 does not fit int32");
  EXPECT_TRUE(Big.checkRequest({"label", DType::Int64, {}}).isOk());
  Dataset NaN = oneFeature(
      "label", makeArray<double>(IdxType::Float64, {1}, {std::nan("")}));
  EXPECT_ERROR_HAS(NaN.checkRequest({"label", DType::Int64, {}}),
                   "of example 0 does not fit int64");

  Dataset Classes = oneFeature(
      "label", makeArray<uint8_t>(IdxType::UInt8, {4}, {0, 9, 10, 1}));
  FeatureRequest R{"label", DType::Int32, {}};
  R.NumClasses = 11;
  EXPECT_TRUE(Classes.checkRequest(R).isOk());
  R.NumClasses = 10;
  EXPECT_ERROR_HAS(Classes.checkRequest(R),
                   "feature 'label' from 'mem': value 10 of example 2 is not "
                   "a class in [0, 10)");
  Dataset Negative =
      oneFeature("label", makeArray<int8_t>(IdxType::Int8, {2}, {0, -1}));
  EXPECT_ERROR_HAS(Negative.checkRequest(R),
                   "value -1 of example 1 is not a class in [0, 10)");
}

TEST(DatasetTest, Synthetic) {
  std::vector<FeatureRequest> Reqs = {{"image", DType::Float32, {4, 5}},
                                      {"label", DType::Int64, {}},
                                      {"w", DType::Float64, {3}}};
  Reqs[1].NumClasses = 7;
  StatusOr<Dataset> A = Dataset::synthetic(Reqs, 100, 42);
  StatusOr<Dataset> B = Dataset::synthetic(Reqs, 100, 42);
  StatusOr<Dataset> C = Dataset::synthetic(Reqs, 100, 43);
  ASSERT_TRUE(A.isOk() && B.isOk() && C.isOk()) << errorOf(A);
  EXPECT_EQ(A->size(), 100);
  for (size_t I = 0; I < 3; ++I) {
    EXPECT_EQ(A->features()[I].Array.Data, B->features()[I].Array.Data);
    EXPECT_NE(A->features()[I].Array.Data, C->features()[I].Array.Data);
    EXPECT_EQ(A->features()[I].Source, "<synthetic>");
    EXPECT_TRUE(A->checkRequest(Reqs[I]).isOk())
        << errorOf(A->checkRequest(Reqs[I]));
  }
  EXPECT_EQ(A->find("image")->exampleShape(), (std::vector<int64_t>{4, 5}));
  const IdxArray &Img = A->find("image")->Array;
  float Lo = 1, Hi = 0;
  for (int64_t I = 0; I < Img.numElements(); ++I) {
    Lo = std::min(Lo, Img.as<float>()[I]);
    Hi = std::max(Hi, Img.as<float>()[I]);
  }
  EXPECT_GE(Lo, 0.0f);
  EXPECT_LT(Hi, 1.0f);
  EXPECT_LT(Lo, 0.05f);
  EXPECT_GT(Hi, 0.95f);
  std::set<int32_t> Labels;
  const IdxArray &L = A->find("label")->Array;
  for (int64_t I = 0; I < L.numElements(); ++I)
    Labels.insert(L.as<int32_t>()[I]);
  EXPECT_EQ(Labels, (std::set<int32_t>{0, 1, 2, 3, 4, 5, 6}));

  // The default number of classes.
  StatusOr<Dataset> D =
      Dataset::synthetic({{"label", DType::Int32, {}}}, 1000, 1, 3);
  ASSERT_TRUE(D.isOk());
  FeatureRequest R{"label", DType::Int32, {}};
  R.NumClasses = 3;
  EXPECT_TRUE(D->checkRequest(R).isOk());
  R.NumClasses = 2;
  EXPECT_FALSE(D->checkRequest(R).isOk());

  EXPECT_EQ(errorOf(Dataset::synthetic(Reqs, 0, 1)),
            "synthetic data needs 1 to 4294967295 examples, not 0");
  EXPECT_EQ(errorOf(Dataset::synthetic(Reqs, int64_t(1) << 32, 1)),
            "synthetic data needs 1 to 4294967295 examples, not 4294967296");
  EXPECT_ERROR_HAS(Dataset::synthetic({{"x", DType::Bool, {}}}, 1, 1),
                   "synthetic feature 'x' cannot be of type bool");
}

TEST(DatasetTest, FashionMnist) {
  if (!fs::exists(FashionDir))
    GTEST_SKIP() << FashionDir << " is missing";
  StatusOr<Dataset> Train = Dataset::load(FashionDir, "train");
  ASSERT_TRUE(Train.isOk()) << errorOf(Train);
  EXPECT_EQ(Train->size(), 60000);
  ASSERT_TRUE(Train->find("image"));
  ASSERT_TRUE(Train->find("label"));
  EXPECT_EQ(Train->find("image")->Array.str(), "ubyte[60000,28,28]");
  EXPECT_EQ(Train->find("label")->Array.str(), "ubyte[60000]");
  const uint8_t *L = Train->find("label")->Array.as<uint8_t>();
  EXPECT_EQ(std::vector<int>(L, L + 10),
            (std::vector<int>{9, 0, 0, 3, 0, 2, 7, 2, 5, 5}));

  StatusOr<Dataset> Test =
      Dataset::load(FashionDir, "t10k", {"image", "label"});
  ASSERT_TRUE(Test.isOk()) << errorOf(Test);
  EXPECT_EQ(Test->size(), 10000);
  const uint8_t *TL = Test->find("label")->Array.as<uint8_t>();
  EXPECT_EQ(std::vector<int>(TL, TL + 10),
            (std::vector<int>{9, 2, 1, 1, 6, 1, 4, 6, 5, 7}));

  // The first training image, scaled, through an iterator in order.
  auto Data = std::make_shared<const Dataset>(Train.take());
  FeatureRequest Image{"image", DType::Float32, {28, 28, 1}};
  FeatureRequest Label{"label", DType::Int32, {}};
  Label.NumClasses = 10;
  BatchOptions O;
  O.BatchSize = 2;
  O.Shuffle = false;
  auto It = BatchIterator::create(Data, {Image, Label}, O);
  ASSERT_TRUE(It.isOk()) << errorOf(It);
  std::vector<float> Pixels(2 * 784);
  std::vector<int32_t> Labels(2);
  BatchInfo Info = (*It)->next({Pixels.data(), Labels.data()});
  EXPECT_EQ(Info.Valid, 2);
  EXPECT_EQ(Labels, (std::vector<int32_t>{9, 0}));
  double Sum = 0;
  float Max = 0;
  for (int I = 0; I < 784; ++I) {
    Sum += Pixels[size_t(I)];
    Max = std::max(Max, Pixels[size_t(I)]);
  }
  EXPECT_NEAR(Sum, 76247.0 / 255.0, 1e-3);
  EXPECT_EQ(Max, 1.0f);
  EXPECT_EQ((*It)->batchesPerEpoch(), 30000);
}

//===----------------------------------------------------------------------===//
// Shuffling and batches
//===----------------------------------------------------------------------===//

TEST(ShuffleTest, Permutation) {
  const int64_t N = 1000;
  std::vector<uint32_t> A = shufflePermutation(N, 7, 0);
  EXPECT_EQ(A, shufflePermutation(N, 7, 0));
  EXPECT_NE(A, shufflePermutation(N, 7, 1));
  EXPECT_NE(A, shufflePermutation(N, 8, 0));
  std::vector<uint32_t> Sorted = A;
  std::sort(Sorted.begin(), Sorted.end());
  for (uint32_t I = 0; I < N; ++I)
    ASSERT_EQ(Sorted[I], I);
  // Shuffled, not nearly the identity.
  int Fixed = 0;
  for (uint32_t I = 0; I < N; ++I)
    Fixed += A[I] == I;
  EXPECT_LT(Fixed, 10);
  EXPECT_TRUE(shufflePermutation(0, 1, 1).empty());
  EXPECT_EQ(shufflePermutation(1, 1, 1), std::vector<uint32_t>{0});
  // Every position gets every value about equally often.
  std::vector<int> FirstCounts(4);
  for (int64_t E = 0; E < 4000; ++E)
    ++FirstCounts[shufflePermutation(4, 3, E)[0]];
  for (int C : FirstCounts)
    EXPECT_NEAR(C, 1000, 150);
}

/// A dataset whose feature "id" holds each example's index (int32) and
/// feature "x" holds [id, id + 0.5] (float32).
std::shared_ptr<const Dataset> idDataset(int32_t N) {
  std::vector<int32_t> Ids(size_t(N), 0);
  std::vector<float> X(2 * size_t(N));
  for (int32_t I = 0; I < N; ++I) {
    Ids[size_t(I)] = I;
    X[2 * size_t(I)] = float(I);
    X[2 * size_t(I) + 1] = float(I) + 0.5f;
  }
  auto D = std::make_shared<Dataset>();
  Feature Id{"id", "mem",
             makeArray<int32_t>(IdxType::Int32, {uint32_t(N)}, Ids)};
  Feature Xs{"x", "mem",
             makeArray<float>(IdxType::Float32, {uint32_t(N), 2}, X)};
  EXPECT_TRUE(D->addFeature(std::move(Id)).isOk());
  EXPECT_TRUE(D->addFeature(std::move(Xs)).isOk());
  return D;
}

const std::vector<FeatureRequest> IdRequests = {{"id", DType::Int64, {}},
                                                {"x", DType::Float32, {2}}};

struct Batch {
  BatchInfo Info;
  std::vector<int64_t> Ids;
  std::vector<float> X;
  bool operator==(const Batch &O) const {
    return Info.Position == O.Info.Position && Info.Valid == O.Info.Valid &&
           Info.EndOfEpoch == O.Info.EndOfEpoch && Ids == O.Ids && X == O.X;
  }
};

std::ostream &operator<<(std::ostream &OS, const Batch &B) {
  OS << "{" << B.Info.Position.str() << ", valid " << B.Info.Valid << ", ids";
  for (int64_t I : B.Ids)
    OS << " " << I;
  return OS << "}";
}

Batch nextBatch(BatchIterator &It) {
  Batch B;
  B.Ids.resize(size_t(It.rows()));
  B.X.resize(2 * size_t(It.rows()));
  EXPECT_EQ(It.batchBytes(0), B.Ids.size() * 8);
  EXPECT_EQ(It.batchBytes(1), B.X.size() * 4);
  B.Info = It.next({B.Ids.data(), B.X.data()});
  // The two features stay aligned.
  for (size_t R = 0; R < B.Ids.size(); ++R) {
    EXPECT_EQ(B.X[2 * R], float(B.Ids[R]));
    EXPECT_EQ(B.X[2 * R + 1], float(B.Ids[R]) + 0.5f);
  }
  return B;
}

std::unique_ptr<BatchIterator> makeIterator(std::shared_ptr<const Dataset> D,
                                            const BatchOptions &O) {
  auto It = BatchIterator::create(std::move(D), IdRequests, O);
  EXPECT_TRUE(It.isOk()) << errorOf(It);
  return It.isOk() ? It.take() : nullptr;
}

TEST(BatchIteratorTest, TrainingEpochs) {
  auto D = idDataset(103);
  for (int Prefetch : {0, 2}) {
    SCOPED_TRACE("prefetch " + std::to_string(Prefetch));
    BatchOptions O;
    O.BatchSize = 10;
    O.Seed = 5;
    O.Prefetch = Prefetch;
    auto It = makeIterator(D, O);
    ASSERT_TRUE(It);
    EXPECT_EQ(It->batchesPerEpoch(), 10);
    EXPECT_EQ(It->rows(), 10);
    std::vector<std::vector<int64_t>> EpochIds(3);
    for (int64_t E = 0; E < 3; ++E) {
      for (int64_t K = 0; K < 10; ++K) {
        EXPECT_EQ(It->position(), (DataPosition{E, 10 * K}));
        Batch B = nextBatch(*It);
        EXPECT_EQ(B.Info.Position, (DataPosition{E, 10 * K}));
        EXPECT_EQ(B.Info.Valid, 10);
        EXPECT_EQ(B.Info.EndOfEpoch, K == 9);
        EpochIds[size_t(E)].insert(EpochIds[size_t(E)].end(), B.Ids.begin(),
                                   B.Ids.end());
      }
      // The last 3 examples of the epoch's order are dropped; the rest come
      // in that order, each exactly once.
      std::vector<uint32_t> Order = shufflePermutation(103, 5, E);
      ASSERT_EQ(EpochIds[size_t(E)].size(), 100u);
      for (size_t I = 0; I < 100; ++I)
        EXPECT_EQ(EpochIds[size_t(E)][I], int64_t(Order[I]));
      std::set<int64_t> Unique(EpochIds[size_t(E)].begin(),
                               EpochIds[size_t(E)].end());
      EXPECT_EQ(Unique.size(), 100u);
    }
    EXPECT_NE(EpochIds[0], EpochIds[1]);
    EXPECT_NE(EpochIds[1], EpochIds[2]);
    EXPECT_EQ(It->position(), (DataPosition{3, 0}));
  }
}

TEST(BatchIteratorTest, EveryExampleOncePerEpoch) {
  auto D = idDataset(120);
  BatchOptions O;
  O.BatchSize = 12;
  O.Seed = 99;
  auto It = makeIterator(D, O);
  ASSERT_TRUE(It);
  for (int E = 0; E < 4; ++E) {
    std::vector<int> Seen(120);
    for (int K = 0; K < 10; ++K)
      for (int64_t Id : nextBatch(*It).Ids)
        ++Seen[size_t(Id)];
    for (int C : Seen)
      EXPECT_EQ(C, 1);
  }
}

TEST(BatchIteratorTest, InOrderWithoutShuffle) {
  auto D = idDataset(25);
  BatchOptions O;
  O.BatchSize = 5;
  O.Shuffle = false;
  auto It = makeIterator(D, O);
  ASSERT_TRUE(It);
  for (int E = 0; E < 2; ++E)
    for (int K = 0; K < 5; ++K) {
      Batch B = nextBatch(*It);
      for (int R = 0; R < 5; ++R)
        EXPECT_EQ(B.Ids[size_t(R)], 5 * K + R);
    }
}

TEST(BatchIteratorTest, EvaluationPadsTheLastBatch) {
  auto D = idDataset(10);
  for (int Prefetch : {0, 3}) {
    SCOPED_TRACE("prefetch " + std::to_string(Prefetch));
    BatchOptions O;
    O.BatchSize = 4;
    O.Shuffle = false;
    O.Last = LastBatch::Pad;
    O.Prefetch = Prefetch;
    auto It = makeIterator(D, O);
    ASSERT_TRUE(It);
    EXPECT_EQ(It->batchesPerEpoch(), 3);
    Batch B0 = nextBatch(*It), B1 = nextBatch(*It), B2 = nextBatch(*It);
    EXPECT_EQ(B0.Ids, (std::vector<int64_t>{0, 1, 2, 3}));
    EXPECT_EQ(B1.Ids, (std::vector<int64_t>{4, 5, 6, 7}));
    EXPECT_EQ(B2.Ids, (std::vector<int64_t>{8, 9, 9, 9}));
    EXPECT_EQ(B0.Info.Valid, 4);
    EXPECT_EQ(B0.Info.PaddingExample, -1);
    EXPECT_EQ(B2.Info.PaddingExample, 9);
    EXPECT_EQ(B1.Info.Valid, 4);
    EXPECT_EQ(B2.Info.Valid, 2);
    EXPECT_FALSE(B1.Info.EndOfEpoch);
    EXPECT_TRUE(B2.Info.EndOfEpoch);
    EXPECT_EQ(It->position(), (DataPosition{1, 0}));
    Batch Next = nextBatch(*It);
    EXPECT_EQ(Next.Ids, (std::vector<int64_t>{0, 1, 2, 3}));
    EXPECT_EQ(Next.Info.Position, (DataPosition{1, 0}));
  }

  // A batch larger than the dataset repeats the last example.
  BatchOptions O;
  O.BatchSize = 8;
  O.Shuffle = false;
  O.Last = LastBatch::Pad;
  auto Small = makeIterator(idDataset(3), O);
  ASSERT_TRUE(Small);
  Batch B = nextBatch(*Small);
  EXPECT_EQ(B.Ids, (std::vector<int64_t>{0, 1, 2, 2, 2, 2, 2, 2}));
  EXPECT_EQ(B.Info.Valid, 3);
  EXPECT_EQ(B.Info.PaddingExample, 2);
  EXPECT_TRUE(B.Info.EndOfEpoch);

  // Shuffled evaluation pads with the last example of the epoch's order.
  O.BatchSize = 4;
  O.Shuffle = true;
  O.Seed = 3;
  auto Shuffled = makeIterator(idDataset(10), O);
  ASSERT_TRUE(Shuffled);
  std::vector<uint32_t> Order = shufflePermutation(10, 3, 0);
  nextBatch(*Shuffled);
  nextBatch(*Shuffled);
  B = nextBatch(*Shuffled);
  EXPECT_EQ(B.Ids,
            (std::vector<int64_t>{Order[8], Order[9], Order[9], Order[9]}));
  EXPECT_EQ(B.Info.Valid, 2);

  // fillPadding: a whole batch of the padding example, the iterator stays.
  DataPosition Before = Shuffled->position();
  Batch Pad;
  Pad.Ids.assign(4, -1);
  Pad.X.assign(8, -1);
  Shuffled->fillPadding(
      B.Info, std::vector<void *>{Pad.Ids.data(), Pad.X.data()}.data());
  EXPECT_EQ(Pad.Ids, (std::vector<int64_t>(4, Order[9])));
  for (size_t R = 0; R < 4; ++R)
    EXPECT_EQ(Pad.X[2 * R], float(Order[9]));
  EXPECT_EQ(Shuffled->position(), Before);
}

TEST(BatchIteratorTest, PrefetchGivesTheSameBatches) {
  auto D = idDataset(97);
  std::vector<Batch> Reference;
  for (int Prefetch : {0, 1, 2, 5}) {
    for (LastBatch Last : {LastBatch::Drop, LastBatch::Pad}) {
      SCOPED_TRACE("prefetch " + std::to_string(Prefetch) +
                   (Last == LastBatch::Drop ? " drop" : " pad"));
      BatchOptions O;
      O.BatchSize = 8;
      O.Seed = 11;
      O.Prefetch = Prefetch;
      O.Last = Last;
      auto It = makeIterator(D, O);
      ASSERT_TRUE(It);
      std::vector<Batch> Got;
      for (int K = 0; K < 40; ++K)
        Got.push_back(nextBatch(*It));
      if (Prefetch == 0 && Last == LastBatch::Drop)
        Reference.insert(Reference.end(), Got.begin(), Got.end());
      if (Last == LastBatch::Drop)
        EXPECT_EQ(Got, Reference);
      else
        EXPECT_EQ(Got[12].Info.Valid, 1); // 97 = 12 * 8 + 1.
    }
  }
}

TEST(BatchIteratorTest, PositionRestoreReproducesBatches) {
  auto D = idDataset(50);
  for (LastBatch Last : {LastBatch::Drop, LastBatch::Pad}) {
    for (int Prefetch : {0, 2}) {
      SCOPED_TRACE("prefetch " + std::to_string(Prefetch) +
                   (Last == LastBatch::Drop ? " drop" : " pad"));
      BatchOptions O;
      O.BatchSize = 7;
      O.Seed = 1234;
      O.Prefetch = Prefetch;
      O.Last = Last;
      auto A = makeIterator(D, O);
      ASSERT_TRUE(A);
      // Stop in the middle of epoch 1, so restoring has to cross an epoch
      // boundary and recompute an order.
      for (int K = 0; K < 10; ++K)
        nextBatch(*A);
      DataPosition Saved = A->position();
      EXPECT_EQ(Saved.Epoch, 1);
      std::vector<Batch> Following;
      for (int K = 0; K < 20; ++K)
        Following.push_back(nextBatch(*A));

      // A new iterator starting there (resume after a restart).
      BatchOptions R = O;
      R.Start = Saved;
      auto B = makeIterator(D, R);
      ASSERT_TRUE(B);
      EXPECT_EQ(B->position(), Saved);
      for (int K = 0; K < 20; ++K)
        EXPECT_EQ(nextBatch(*B), Following[size_t(K)]) << "batch " << K;

      // The same iterator, moved back (and with batches prefetched ahead).
      ASSERT_TRUE(A->seek(Saved).isOk());
      EXPECT_EQ(A->position(), Saved);
      for (int K = 0; K < 20; ++K)
        EXPECT_EQ(nextBatch(*A), Following[size_t(K)]) << "batch " << K;

      // A fresh iterator moved forward.
      auto C = makeIterator(D, O);
      ASSERT_TRUE(C);
      nextBatch(*C);
      ASSERT_TRUE(C->seek(Saved).isOk());
      for (int K = 0; K < 20; ++K)
        EXPECT_EQ(nextBatch(*C), Following[size_t(K)]) << "batch " << K;
    }
  }
}

TEST(BatchIteratorTest, SeekWhileTheWorkerIsBusy) {
  // Batches large enough that seek() usually lands while the worker is
  // filling one: what it was filling must be thrown away.
  auto D = idDataset(20000);
  BatchOptions O;
  O.BatchSize = 2000;
  O.Seed = 8;
  O.Prefetch = 0;
  auto Sync = makeIterator(D, O);
  O.Prefetch = 2;
  auto Async = makeIterator(D, O);
  ASSERT_TRUE(Sync && Async);
  for (int Round = 0; Round < 60; ++Round) {
    nextBatch(*Async);
    DataPosition P{Round % 7, 2000 * ((Round * 5) % 10)};
    ASSERT_TRUE(Async->seek(P).isOk());
    ASSERT_TRUE(Sync->seek(P).isOk());
    for (int K = 0; K < 1 + Round % 3; ++K) {
      Batch A = nextBatch(*Async);
      Batch S = nextBatch(*Sync);
      ASSERT_EQ(A.Info.Position, S.Info.Position) << "round " << Round;
      ASSERT_EQ(A.Ids, S.Ids) << "round " << Round;
    }
  }
}

TEST(BatchIteratorTest, ShardsSliceTheGlobalBatch) {
  auto D = idDataset(30);
  for (LastBatch Last : {LastBatch::Drop, LastBatch::Pad}) {
    BatchOptions O;
    O.BatchSize = 8;
    O.Seed = 2;
    O.Last = Last;
    auto Global = makeIterator(D, O);
    ASSERT_TRUE(Global);
    std::vector<std::unique_ptr<BatchIterator>> Shards;
    for (int S = 0; S < 4; ++S) {
      BatchOptions SO = O;
      SO.NumShards = 4;
      SO.ShardIndex = S;
      Shards.push_back(makeIterator(D, SO));
      ASSERT_TRUE(Shards.back());
      EXPECT_EQ(Shards.back()->rows(), 2);
    }
    for (int K = 0; K < 9; ++K) {
      Batch G = nextBatch(*Global);
      std::vector<int64_t> Joined;
      int64_t Valid = 0;
      for (auto &S : Shards) {
        Batch B = nextBatch(*S);
        Joined.insert(Joined.end(), B.Ids.begin(), B.Ids.end());
        Valid += B.Info.Valid;
        EXPECT_EQ(B.Info.Position, G.Info.Position);
      }
      EXPECT_EQ(Joined, G.Ids) << "batch " << K;
      EXPECT_EQ(Valid, G.Info.Valid) << "batch " << K;
    }
  }
}

TEST(BatchIteratorTest, Errors) {
  auto D = idDataset(10);
  BatchOptions O;
  O.BatchSize = 11;
  EXPECT_ERROR_HAS(BatchIterator::create(D, IdRequests, O),
                   "the dataset has 10 examples, fewer than one batch of 11");
  O.BatchSize = 0;
  EXPECT_ERROR_HAS(BatchIterator::create(D, IdRequests, O), "bad batch size 0");
  O.BatchSize = 4;
  O.NumShards = 3;
  EXPECT_ERROR_HAS(BatchIterator::create(D, IdRequests, O),
                   "the batch size 4 is not a multiple of the 3 shards");
  O.NumShards = 2;
  O.ShardIndex = 2;
  EXPECT_ERROR_HAS(BatchIterator::create(D, IdRequests, O), "bad shard 2 of 2");
  O.NumShards = 1;
  O.ShardIndex = 0;
  EXPECT_ERROR_HAS(BatchIterator::create(D, {{"id", DType::Int32, {2}}}, O),
                   "feature 'id' from 'mem' has 1 elements per example");
  EXPECT_EQ(errorOf(BatchIterator::create(D, {}, O)),
            "batches with no features requested");
  EXPECT_EQ(errorOf(BatchIterator::create(std::make_shared<Dataset>(),
                                          IdRequests, O)),
            "batches of an empty dataset");
  EXPECT_EQ(errorOf(BatchIterator::create(nullptr, IdRequests, O)),
            "batches of an empty dataset");
  O.Prefetch = -1;
  EXPECT_EQ(errorOf(BatchIterator::create(D, IdRequests, O)),
            "bad prefetch depth -1");
  O.Prefetch = 2;
  O.Start = {0, 8};
  EXPECT_ERROR_HAS(BatchIterator::create(D, IdRequests, O),
                   "bad start position: data position (epoch 0, index 8) is "
                   "not the start of a batch of 4 in a dataset of 10 "
                   "examples");
  O.Start = {};
  auto It = makeIterator(D, O);
  ASSERT_TRUE(It);
  EXPECT_ERROR_HAS(It->seek({-1, 0}), "data position (epoch -1, index 0)");
  EXPECT_ERROR_HAS(It->seek({0, 7}), "(epoch 0, index 7) is not the start");
  EXPECT_TRUE(It->seek({5, 6}).isOk());
  EXPECT_EQ(It->position(), (DataPosition{5, 6}));
  // Evaluation accepts any index within the epoch.
  O.Last = LastBatch::Pad;
  auto Eval = makeIterator(D, O);
  ASSERT_TRUE(Eval);
  EXPECT_TRUE(Eval->seek({0, 9}).isOk());
  EXPECT_ERROR_HAS(Eval->seek({0, 10}), "index 10");
}

TEST(BatchIteratorTest, PrefetchPastTheAddressSpace) {
  // 2^31 - 1 batches of 2^33 rows of 8 bytes: more than 2^63 bytes.
  std::vector<FeatureRequest> Big = {{"x", DType::Float64, {1}}};
  EXPECT_EQ(
      errorOf(BatchIterator::checkPrefetch(Big, int64_t(1) << 33, 2147483647)),
      "cannot allocate 2147483647 prefetched batches of 68719476736 "
      "bytes: more than 2^63 bytes");
  EXPECT_TRUE(BatchIterator::checkPrefetch(Big, 64, 2).isOk());
}

TEST(BatchIteratorTest, ShutdownWhileTheWorkerWaits) {
  // Destroying an iterator whose prefetch queue is full, empty, or being
  // refilled must neither hang nor crash.
  auto D = idDataset(1000);
  for (int Round = 0; Round < 50; ++Round) {
    BatchOptions O;
    O.BatchSize = 100;
    O.Prefetch = 1 + Round % 4;
    auto It = makeIterator(D, O);
    ASSERT_TRUE(It);
    for (int K = 0; K < Round % 3; ++K)
      nextBatch(*It);
    if (Round % 5 == 0) {
      ASSERT_TRUE(It->seek({7, 300}).isOk());
    }
  }
}

} // namespace
