// Host/device qualifiers shared by code that GPU compilers also see.
#pragma once

#if defined(__CUDACC__) || defined(__HIPCC__)
#define TANDEM_HOST_DEVICE __host__ __device__
#else
#define TANDEM_HOST_DEVICE
#endif
