// The part of DLPack's ABI (dlpack/dlpack.h, v1.0, Apache-2.0) that
// shmreg.Region exports: the legacy DLManagedTensor ("dltensor" capsules) and
// the versioned DLManagedTensorVersioned ("dltensor_versioned"). Layouts are
// DLPack's, field for field.
#pragma once

#include <cstdint>

namespace dlpack {

enum DeviceType : int32_t { kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3 };
enum DataTypeCode : uint8_t { kDLUInt = 1 };

struct Device {
    int32_t device_type;
    int32_t device_id;
};

struct DataType {
    uint8_t code;
    uint8_t bits;
    uint16_t lanes;
};

struct Tensor {
    void *data;
    Device device;
    int32_t ndim;
    DataType dtype;
    int64_t *shape;
    int64_t *strides;
    uint64_t byte_offset;
};

struct ManagedTensor {
    Tensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(ManagedTensor *self);
};

struct Version {
    uint32_t major;
    uint32_t minor;
};

constexpr uint64_t kFlagReadOnly = 1ull << 0;

struct ManagedTensorVersioned {
    Version version;
    void *manager_ctx;
    void (*deleter)(ManagedTensorVersioned *self);
    uint64_t flags;
    Tensor dl_tensor;
};

} // namespace dlpack
