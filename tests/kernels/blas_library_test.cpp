// The library of the matrix products: oneDNN unless a user selects MKL; settings and files that
// are not MKL refused with the setting named and the selection kept; and MKL's products, where
// this machine has MKL (SHARDWISE_TEST_MKL names libmkl_rt), the same as oneDNN's.
#include "shardwise/kernels/blas_library.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <vector>

#include "kernels/gemm.hpp"
#include "mkl_for_tests.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/kernels/attention.hpp"
#include "shardwise/kernels/matmul.hpp"

namespace shardwise::kernels {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

using shardwise::testing::mkl_for_tests;

// Selects `setting` for a test and oneDNN again after it.
class SelectedFor {
 public:
  explicit SelectedFor(const std::string& setting) { select_blas(setting, "--blas"); }
  SelectedFor(const SelectedFor&) = delete;
  SelectedFor& operator=(const SelectedFor&) = delete;
  ~SelectedFor() { select_blas("onednn", "--blas"); }
};

std::vector<float> random_values(std::size_t count, unsigned seed) {
  std::mt19937 generator(seed);
  std::uniform_real_distribution<float> uniform(-1.0F, 1.0F);
  std::vector<float> values(count);
  for (float& v : values) v = uniform(generator);
  return values;
}

void expect_refused(const std::string& setting, const std::string& message) {
  try {
    select_blas(setting, "--blas");
    ADD_FAILURE() << setting << " was accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(message)) << setting;
  }
  EXPECT_EQ(blas_library(), BlasLibrary::kOneDnn) << setting;
  EXPECT_EQ(blas_setting(), "onednn") << setting;
}

TEST(BlasLibrary, OneDnnUnlessSelected) {
  EXPECT_EQ(blas_library(), BlasLibrary::kOneDnn);
  EXPECT_EQ(blas_setting(), "onednn");
  EXPECT_THAT(blas_description(), StartsWith("oneDNN "));
  select_blas("onednn", "--blas");
  EXPECT_EQ(blas_library(), BlasLibrary::kOneDnn);
}

TEST(BlasLibrary, OtherSettingsAreRefusedWithTheSettingNamed) {
  expect_refused("openblas", "--blas is 'openblas'; expected onednn, mkl or mkl:PATH");
  expect_refused("", "--blas is ''");
  expect_refused("MKL", "--blas is 'MKL'");
  expect_refused("onednn ", "--blas is 'onednn '");
  expect_refused("mkl:", "--blas is 'mkl:' with no path");
  try {
    select_blas("blis", "SHARDWISE_BLAS");
    ADD_FAILURE() << "blis was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), StartsWith("SHARDWISE_BLAS is 'blis'"));
  }
}

TEST(BlasLibrary, FilesThatAreNotMklAreRefusedAndNothingHangs) {
  expect_refused("mkl:/dev/zero", "--blas: /dev/zero is not a regular file");
  expect_refused("mkl:/", "--blas: / is not a regular file");
  expect_refused("mkl:/nonexistent/libmkl_rt.so.2", "/nonexistent/libmkl_rt.so.2 is not a regular");
  // A FIFO: the loader would wait for a writer forever.
  const std::filesystem::path fifo =
      std::filesystem::temp_directory_path() / ("shardwise_blas_fifo_" + std::to_string(getpid()));
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  expect_refused("mkl:" + fifo.string(), fifo.string() + " is not a regular file");
  std::filesystem::remove(fifo);
  // A file that is no shared library, and a shared library that is not MKL.
  const std::filesystem::path text =
      std::filesystem::temp_directory_path() / ("shardwise_blas_text_" + std::to_string(getpid()));
  { std::ofstream(text) << "not a library"; }
  expect_refused("mkl:" + text.string(), "--blas: cannot load " + text.string());
  std::filesystem::remove(text);
  // A path with a line break, and one of 100000 bytes: escaped and cut short in one line.
  expect_refused("mkl:/nonexistent/a\nb", "--blas: /nonexistent/a\\nb is not a regular file");
  const std::string huge(100000, 'x');
  try {
    select_blas("mkl:/" + huge, "--blas");
    ADD_FAILURE() << "a 100000-byte path was accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("more bytes)"));
    EXPECT_LT(std::string(e.what()).size(), 600U);
  }
  try {
    select_blas(huge, "--blas");
    ADD_FAILURE() << "a 100000-byte setting was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_LT(std::string(e.what()).size(), 300U);
  }
  expect_refused("mkl:libm.so.6",
                 "--blas: libm.so.6 has no MKL_Set_Interface_Layer; expected "
                 "Intel MKL's runtime library, libmkl_rt");
}

// Every form of product, strided and not, with beta 0 and 1, at sizes that take oneDNN's sgemm and
// the packed kernel: MKL's the same as oneDNN's within rounding, and the same bits on 1 and 2
// threads.
TEST(BlasLibrary, MklProductsAreOneDnnsOnAnyThreads) {
  const std::string mkl = mkl_for_tests();
  if (mkl.empty()) GTEST_SKIP() << "no libmkl_rt on this machine (tests/mkl_for_tests.hpp)";
  struct Shape {
    std::size_t m, n, k, pad;
  };
  for (const Shape shape : {Shape{7, 5, 3, 0}, Shape{64, 96, 48, 3}, Shape{384, 256, 1100, 0},
                            Shape{130, 70, 513, 5}}) {
    for (const bool trans_a : {false, true}) {
      for (const bool trans_b : {false, true}) {
        for (const float beta : {0.0F, 1.0F}) {
          const std::size_t lda = (trans_a ? shape.m : shape.k) + shape.pad;
          const std::size_t ldb = (trans_b ? shape.k : shape.n) + shape.pad;
          const std::size_t ldc = shape.n + shape.pad;
          const std::vector<float> a = random_values((trans_a ? shape.k : shape.m) * lda, 1);
          const std::vector<float> b = random_values((trans_b ? shape.n : shape.k) * ldb, 2);
          const std::vector<float> c0 = random_values(shape.m * ldc, 3);
          const auto product = [&](int threads) {
            std::vector<float> c = c0;
            const int caller = blas_threads();
            set_blas_threads(threads);
            detail::sgemm(trans_a, trans_b, shape.m, shape.n, shape.k, 0.5F, a.data(), lda,
                          b.data(), ldb, beta, c.data(), ldc);
            set_blas_threads(caller);
            return c;
          };
          const std::vector<float> onednn = product(2);
          std::vector<float> on_mkl;
          std::vector<float> on_mkl_one;
          {
            const SelectedFor selected("mkl:" + mkl);
            on_mkl = product(2);
            on_mkl_one = product(1);
          }
          EXPECT_EQ(on_mkl, on_mkl_one) << shape.m << "x" << shape.n << "x" << shape.k;
          for (std::size_t i = 0; i < onednn.size(); ++i) {
            ASSERT_NEAR(on_mkl[i], onednn[i], 1e-5F * static_cast<float>(shape.k))
                << shape.m << "x" << shape.n << "x" << shape.k << " at " << i;
          }
        }
      }
    }
  }
}

// A stride shorter than its row: MKL would print a line and compute nothing; an error instead,
// as on oneDNN.
TEST(BlasLibrary, ShortStridesAreAnErrorOnMkl) {
  const std::string mkl = mkl_for_tests();
  if (mkl.empty()) GTEST_SKIP() << "no libmkl_rt on this machine (tests/mkl_for_tests.hpp)";
  const SelectedFor selected("mkl:" + mkl);
  std::vector<float> x(64, 1.0F);
  std::vector<float> y(64, 7.0F);
  try {
    detail::sgemm(false, false, 4, 4, 4, 1.0F, x.data(), 3, x.data(), 4, 0.0F, y.data(), 4);
    ADD_FAILURE() << "a stride of 3 for rows of 4 was accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("strides 3, 4, 4 are shorter than rows of 4, 4, 4"));
  }
  EXPECT_THROW(
      detail::sgemm(true, true, 4, 5, 6, 1.0F, x.data(), 4, x.data(), 5, 0.0F, y.data(), 5), Error);
}

// A product whose sizes MKL's 32-bit interface cannot hold (a row stride past INT_MAX) runs on
// oneDNN, with the same values, and the description says so.
TEST(BlasLibrary, ProductsPastMklsSizesRunOnOneDnnAndAreCounted) {
  const std::string mkl = mkl_for_tests();
  if (mkl.empty()) GTEST_SKIP() << "no libmkl_rt on this machine (tests/mkl_for_tests.hpp)";
  const SelectedFor selected("mkl:" + mkl);
  EXPECT_THAT(blas_description(), ::testing::Not(HasSubstr("past MKL's 32-bit sizes")));
  // One row of A is read, whatever its stride.
  const std::vector<float> a{1.0F, 2.0F};
  const std::vector<float> b{3.0F, 4.0F, 5.0F, 6.0F};
  std::vector<float> c(2, 0.0F);
  const std::size_t stride = std::size_t{1} << 31;
  detail::sgemm(false, false, 1, 2, 2, 1.0F, a.data(), stride, b.data(), 2, 0.0F, c.data(), 2);
  EXPECT_EQ(c, (std::vector<float>{13.0F, 16.0F}));
  EXPECT_THAT(blas_description(), HasSubstr("1 product past MKL's 32-bit sizes ran on oneDNN"));
}

// The attention calls its tile products from inside its loop's threads, where MKL must run on the
// calling thread alone: the same output as on oneDNN.
TEST(BlasLibrary, MklInsideTheKernelsLoops) {
  const std::string mkl = mkl_for_tests();
  if (mkl.empty()) GTEST_SKIP() << "no libmkl_rt on this machine (tests/mkl_for_tests.hpp)";
  const std::size_t batch = 3;
  const std::size_t seq = 200;
  const std::size_t channels = 64;
  const std::size_t heads = 2;
  const std::vector<float> qkv = random_values(batch * seq * 3 * channels, 4);
  const auto attend = [&] {
    std::vector<float> out(batch * seq * channels);
    std::vector<float> lse(batch * heads * seq);
    attention_forward(out.data(), lse.data(), qkv.data(), batch, seq, channels, heads);
    return out;
  };
  const std::vector<float> onednn = attend();
  std::vector<float> on_mkl;
  {
    const SelectedFor selected("mkl:" + mkl);
    EXPECT_EQ(blas_library(), BlasLibrary::kMkl);
    EXPECT_EQ(blas_setting(), "mkl:" + mkl);
    EXPECT_THAT(blas_description(), StartsWith("MKL "));
    on_mkl = attend();
  }
  EXPECT_EQ(blas_library(), BlasLibrary::kOneDnn);
  for (std::size_t i = 0; i < onednn.size(); ++i) ASSERT_NEAR(on_mkl[i], onednn[i], 1e-5F) << i;
}

}  // namespace
}  // namespace shardwise::kernels
