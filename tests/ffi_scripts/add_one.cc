// A typed XLA FFI handler for tests/test_ffi.py: y = x * 2 + 1, element by element (float32).
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

static ffi::Error TwiceplusOne(ffi::Buffer<ffi::F32> x, ffi::ResultBuffer<ffi::F32> y) {
  for (size_t i = 0; i < x.element_count(); ++i) y->typed_data()[i] = x.typed_data()[i] * 2.0f + 1.0f;
  return ffi::Error::Success();
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(pjrt_neuron_test_twice_plus_one, TwiceplusOne,
                              ffi::Ffi::Bind().Arg<ffi::Buffer<ffi::F32>>().Ret<ffi::Buffer<ffi::F32>>());
