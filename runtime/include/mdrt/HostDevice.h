//===- HostDevice.h - Functions both CPU and GPU code call ------*- C++ -*-===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// MDRT_HOST_DEVICE marks the functions that CPU and GPU code share (the
// random streams of Random.h, KernelChecks.h, lib/cuda's host-and-device
// headers such as UpdateMath.h): nvcc compiles them for both sides, the
// host compiler as plain inline functions, so that the CPU unit tests run
// the arithmetic the GPU's kernels run.
//
//===----------------------------------------------------------------------===//

#ifndef MDRT_HOSTDEVICE_H
#define MDRT_HOSTDEVICE_H

#ifdef __CUDACC__
#define MDRT_HOST_DEVICE __host__ __device__
#else
#define MDRT_HOST_DEVICE
#endif

#endif // MDRT_HOSTDEVICE_H
