# The GPU model 'yolo' (src/models/model_yolo.c): its instances and kernel when the
# server is built with CUDA, a stub that reports it unavailable otherwise.
# Sets SERVER_GPU_MODEL_SOURCES (for the core object library) and
# SERVER_GPU_MODEL_LIBS (the kernel, a static library of its own so that
# the core's C warning flags never reach nvcc).
set(SERVER_GPU_MODEL_SOURCES src/models/model_yolo.c)
set(SERVER_GPU_MODEL_LIBS "")
if(SERVER_CUDA_ENABLED)
  # The H200 of the benchmark is sm_90; every major architecture (and PTX for
  # newer ones) keeps the example usable on other GPUs.
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES all-major)
  endif()
  if(NOT CMAKE_CUDA_COMPILER AND CUDAToolkit_NVCC_EXECUTABLE)
    set(CMAKE_CUDA_COMPILER ${CUDAToolkit_NVCC_EXECUTABLE})
  endif()
  enable_language(CUDA)
  add_library(shmreg_server_yolo_kernel STATIC src/models/yolo_kernel.cu)
  target_include_directories(shmreg_server_yolo_kernel PRIVATE src)
  # Products and sums stay separate (the kernel uses __fmul_rn/__fadd_rn
  # anyway); no fast math: the output must match the CPU reference bit for bit.
  target_compile_options(shmreg_server_yolo_kernel PRIVATE
                         $<$<COMPILE_LANGUAGE:CUDA>:--fmad=false>)
  set_target_properties(shmreg_server_yolo_kernel PROPERTIES
                        CUDA_RUNTIME_LIBRARY Static POSITION_INDEPENDENT_CODE ON)
  # the instances, by concern (src/models/gpu_instance_cuda.h)
  list(APPEND SERVER_GPU_MODEL_SOURCES src/models/gpu_devices_cuda.c src/models/gpu_slots_cuda.c
       src/models/gpu_batching_cuda.c src/models/gpu_timing_cuda.c)
  set(SERVER_GPU_MODEL_LIBS shmreg_server_yolo_kernel)
else()
  list(APPEND SERVER_GPU_MODEL_SOURCES src/models/gpu_instances_none.c)
endif()
message(STATUS "shmreg-server: GPU model 'yolo' ${SERVER_CUDA_ENABLED}")

# The kernel's source run on the CPU (tests/support/yolo_kernel_host: a CUDA stand-in
# for g++), which server/tests/models/test_yolo_kernel_on_cpu.py compares with the
# numpy reference where there is no GPU. Any build with a C++20 compiler,
# CUDA or not; not installed.
include(CheckLanguage)
check_language(CXX)
if(CMAKE_CXX_COMPILER)
  enable_language(CXX)
  add_executable(shmreg-server-yolo-kernel-host tests/support/yolo_kernel_host/main.cpp)
  target_include_directories(shmreg-server-yolo-kernel-host PRIVATE tests/support/yolo_kernel_host src)
  set_target_properties(shmreg-server-yolo-kernel-host PROPERTIES
                        CXX_STANDARD 20 CXX_STANDARD_REQUIRED ON CXX_EXTENSIONS OFF)
  # A product and a sum stay two roundings, as on the GPU.
  target_compile_options(shmreg-server-yolo-kernel-host PRIVATE -ffp-contract=off)
  target_link_libraries(shmreg-server-yolo-kernel-host PRIVATE Threads::Threads)
endif()
