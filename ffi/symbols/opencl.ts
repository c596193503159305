/**
 * OpenCL entry points memlife binds, as data. Each entry carries its C declaration.
 * `optional`: absent before OpenCL 2.0 (SVM) or 1.2; used through `optionalSymbol` (src/opencl/native.ts), which says so.
 * `blocking`: the call can wait on a thread that calls back into JS; an async binding exists too.
 * `reentrant`: a JS callback may run inside the call, on the calling thread (see ffi/types.ts).
 */
import type { CallbackTable, SymbolTable } from "../types.ts";

export const openclSymbols = {
  clGetPlatformIDs: {
    args: ["u32", "buffer", "buffer"], // cl_uint num_entries, cl_platform_id *platforms, cl_uint *num_platforms
    returns: "i32",
  },
  clGetPlatformInfo: {
    args: ["ptr", "u32", "usize", "buffer", "buffer"], // cl_platform_id, cl_platform_info, size_t, void *value, size_t *size_ret
    returns: "i32",
  },
  clGetDeviceIDs: {
    args: ["ptr", "u64", "u32", "buffer", "buffer"], // cl_platform_id, cl_device_type, cl_uint num_entries, cl_device_id *devices, cl_uint *num_devices
    returns: "i32",
  },
  clGetDeviceInfo: {
    args: ["ptr", "u32", "usize", "buffer", "buffer"], // cl_device_id, cl_device_info, size_t, void *value, size_t *size_ret
    returns: "i32",
  },
  clCreateContext: {
    args: ["buffer", "u32", "buffer", "fn", "usize", "buffer"], // const cl_context_properties *, cl_uint num_devices, const cl_device_id *, void (*pfn_notify)(const char *, const void *, size_t, void *), void *user_data, cl_int *errcode_ret
    returns: "ptr", // cl_context
  },
  clRetainContext: { args: ["ptr"], returns: "i32" }, // cl_context
  clReleaseContext: { args: ["ptr"], returns: "i32", blocking: true, reentrant: true }, // cl_context
  clGetContextInfo: {
    args: ["ptr", "u32", "usize", "buffer", "buffer"], // cl_context, cl_context_info, size_t, void *, size_t *
    returns: "i32",
  },
  clCreateCommandQueue: {
    args: ["ptr", "ptr", "u64", "buffer"], // cl_context, cl_device_id, cl_command_queue_properties, cl_int *errcode_ret
    returns: "ptr", // cl_command_queue (deprecated in 2.0, the only form in 1.x)
  },
  clRetainCommandQueue: { args: ["ptr"], returns: "i32" }, // cl_command_queue
  clReleaseCommandQueue: { args: ["ptr"], returns: "i32", blocking: true, reentrant: true }, // cl_command_queue (may finish the queue)
  clGetCommandQueueInfo: {
    args: ["ptr", "u32", "usize", "buffer", "buffer"], // cl_command_queue, cl_command_queue_info, size_t, void *, size_t *
    returns: "i32",
  },
  clFlush: { args: ["ptr"], returns: "i32" }, // cl_command_queue
  clFinish: { args: ["ptr"], returns: "i32", blocking: true }, // cl_command_queue
  clCreateBuffer: {
    args: ["ptr", "u64", "usize", "buffer", "buffer"], // cl_context, cl_mem_flags, size_t size, void *host_ptr, cl_int *errcode_ret
    returns: "ptr", // cl_mem
  },
  clRetainMemObject: { args: ["ptr"], returns: "i32" }, // cl_mem
  // PoCL runs destructor callbacks inside it, on the calling thread; other drivers on one of theirs.
  clReleaseMemObject: { args: ["ptr"], returns: "i32", reentrant: true }, // cl_mem
  clGetMemObjectInfo: {
    args: ["ptr", "u32", "usize", "buffer", "buffer"], // cl_mem, cl_mem_info, size_t, void *, size_t *
    returns: "i32",
  },
  clSetMemObjectDestructorCallback: {
    args: ["ptr", "fn", "usize"], // cl_mem memobj, void (CL_CALLBACK *pfn_notify)(cl_mem, void *user_data), void *user_data
    returns: "i32",
  },
  clEnqueueReadBuffer: {
    args: ["ptr", "ptr", "u32", "usize", "usize", "buffer", "u32", "buffer", "buffer"], // cl_command_queue, cl_mem, cl_bool blocking_read, size_t offset, size_t size, void *ptr, cl_uint num_events, const cl_event *wait_list, cl_event *event
    returns: "i32",
  },
  clEnqueueWriteBuffer: {
    args: ["ptr", "ptr", "u32", "usize", "usize", "buffer", "u32", "buffer", "buffer"], // cl_command_queue, cl_mem, cl_bool blocking_write, size_t offset, size_t size, const void *ptr, cl_uint num_events, const cl_event *wait_list, cl_event *event
    returns: "i32",
  },
  clEnqueueMarkerWithWaitList: {
    args: ["ptr", "u32", "buffer", "buffer"], // cl_command_queue, cl_uint num_events, const cl_event *wait_list, cl_event *event
    returns: "i32",
    optional: true, // OpenCL 1.2
  },
  clWaitForEvents: { args: ["u32", "buffer"], returns: "i32", blocking: true }, // cl_uint num_events, const cl_event *event_list
  clGetEventInfo: {
    args: ["ptr", "u32", "usize", "buffer", "buffer"], // cl_event, cl_event_info, size_t, void *, size_t *
    returns: "i32",
  },
  clSetEventCallback: {
    args: ["ptr", "i32", "fn", "usize"], // cl_event, cl_int command_exec_callback_type, void (CL_CALLBACK *pfn_notify)(cl_event, cl_int event_command_status, void *user_data), void *user_data
    returns: "i32",
    reentrant: true, // PoCL runs pfn_notify inside the call when the event already completed
  },
  clCreateUserEvent: { args: ["ptr", "buffer"], returns: "ptr" }, // cl_context, cl_int *errcode_ret
  // Completing or failing a user event may end the commands waiting on it on the calling thread.
  clSetUserEventStatus: { args: ["ptr", "i32"], returns: "i32", reentrant: true }, // cl_event, cl_int execution_status
  clRetainEvent: { args: ["ptr"], returns: "i32" }, // cl_event
  clReleaseEvent: { args: ["ptr"], returns: "i32", reentrant: true }, // cl_event (with the last reference a driver may free the command and the buffers it held)
  clSVMAlloc: {
    args: ["ptr", "u64", "usize", "u32"], // cl_context, cl_svm_mem_flags, size_t size, cl_uint alignment
    returns: "ptr", // void * (NULL on failure, no error code)
    optional: true, // OpenCL 2.0
  },
  clSVMFree: { args: ["ptr", "ptr"], returns: "void", optional: true }, // cl_context, void *svm_pointer
  clEnqueueSVMFree: {
    args: ["ptr", "u32", "buffer", "fn", "usize", "u32", "buffer", "buffer"], // cl_command_queue, cl_uint num_svm_pointers, void *svm_pointers[], void (CL_CALLBACK *pfn_free_func)(cl_command_queue, cl_uint, void *[], void *), void *user_data, cl_uint num_events, const cl_event *wait_list, cl_event *event
    returns: "i32",
    optional: true, // OpenCL 2.0
    reentrant: true, // NVIDIA may run pfn_free_func inside the call
  },
  clEnqueueSVMMemcpy: {
    args: ["ptr", "u32", "ptr", "ptr", "usize", "u32", "buffer", "buffer"], // cl_command_queue, cl_bool blocking_copy, void *dst_ptr, const void *src_ptr, size_t size, cl_uint num_events, const cl_event *wait_list, cl_event *event
    returns: "i32",
    optional: true, // OpenCL 2.0
  },
  clEnqueueSVMMemFill: {
    args: ["ptr", "ptr", "buffer", "usize", "usize", "u32", "buffer", "buffer"], // cl_command_queue, void *svm_ptr, const void *pattern, size_t pattern_size, size_t size, cl_uint num_events, const cl_event *wait_list, cl_event *event
    returns: "i32",
    optional: true, // OpenCL 2.0
  },
  clEnqueueSVMMap: {
    args: ["ptr", "u32", "u64", "ptr", "usize", "u32", "buffer", "buffer"], // cl_command_queue, cl_bool blocking_map, cl_map_flags, void *svm_ptr, size_t size, cl_uint num_events, const cl_event *wait_list, cl_event *event
    returns: "i32",
    optional: true, // OpenCL 2.0
  },
  clEnqueueSVMUnmap: {
    args: ["ptr", "ptr", "u32", "buffer", "buffer"], // cl_command_queue, void *svm_ptr, cl_uint num_events, const cl_event *wait_list, cl_event *event
    returns: "i32",
    optional: true, // OpenCL 2.0
  },
  clEnqueueCopyBuffer: {
    args: ["ptr", "ptr", "ptr", "usize", "usize", "usize", "u32", "buffer", "buffer"], // cl_command_queue, cl_mem src, cl_mem dst, size_t src_offset, size_t dst_offset, size_t size, cl_uint num_events, const cl_event *wait_list, cl_event *event
    returns: "i32",
  },
  clEnqueueFillBuffer: {
    args: ["ptr", "ptr", "buffer", "usize", "usize", "usize", "u32", "buffer", "buffer"], // cl_command_queue, cl_mem, const void *pattern, size_t pattern_size, size_t offset, size_t size, cl_uint num_events, const cl_event *wait_list, cl_event *event
    returns: "i32",
    optional: true, // OpenCL 1.2
  },
  clEnqueueBarrierWithWaitList: {
    args: ["ptr", "u32", "buffer", "buffer"], // cl_command_queue, cl_uint num_events, const cl_event *wait_list, cl_event *event
    returns: "i32",
    optional: true, // OpenCL 1.2
  },
  clCreateProgramWithSource: {
    args: ["ptr", "u32", "buffer", "buffer", "buffer"], // cl_context, cl_uint count, const char **strings, const size_t *lengths, cl_int *errcode_ret
    returns: "ptr", // cl_program
  },
  clBuildProgram: {
    // Called with pfn_notify NULL through the async binding: the build blocks a backend thread, never the JS thread.
    args: ["ptr", "u32", "buffer", "cstring", "fn", "usize"], // cl_program, cl_uint num_devices, const cl_device_id *device_list, const char *options, void (CL_CALLBACK *pfn_notify)(cl_program, void *), void *user_data
    returns: "i32",
    blocking: true,
  },
  clGetProgramInfo: {
    args: ["ptr", "u32", "usize", "buffer", "buffer"], // cl_program, cl_program_info, size_t, void *, size_t *
    returns: "i32",
  },
  clGetProgramBuildInfo: {
    args: ["ptr", "ptr", "u32", "usize", "buffer", "buffer"], // cl_program, cl_device_id, cl_program_build_info, size_t, void *, size_t *
    returns: "i32",
  },
  clRetainProgram: { args: ["ptr"], returns: "i32" }, // cl_program
  clReleaseProgram: { args: ["ptr"], returns: "i32", reentrant: true }, // cl_program (conservatively: a driver may free what its kernels hold)
  clCreateKernel: {
    args: ["ptr", "cstring", "buffer"], // cl_program, const char *kernel_name, cl_int *errcode_ret
    returns: "ptr", // cl_kernel
  },
  clCreateKernelsInProgram: {
    args: ["ptr", "u32", "buffer", "buffer"], // cl_program, cl_uint num_kernels, cl_kernel *kernels, cl_uint *num_kernels_ret
    returns: "i32",
  },
  clGetKernelInfo: {
    args: ["ptr", "u32", "usize", "buffer", "buffer"], // cl_kernel, cl_kernel_info, size_t, void *, size_t *
    returns: "i32",
  },
  clGetKernelWorkGroupInfo: {
    args: ["ptr", "ptr", "u32", "usize", "buffer", "buffer"], // cl_kernel, cl_device_id, cl_kernel_work_group_info, size_t, void *, size_t *
    returns: "i32",
  },
  clGetKernelArgInfo: {
    args: ["ptr", "u32", "u32", "usize", "buffer", "buffer"], // cl_kernel, cl_uint arg_indx, cl_kernel_arg_info, size_t, void *, size_t *
    returns: "i32",
    optional: true, // OpenCL 1.2
  },
  clRetainKernel: { args: ["ptr"], returns: "i32" }, // cl_kernel
  clReleaseKernel: { args: ["ptr"], returns: "i32", reentrant: true }, // cl_kernel (a driver that retains arguments may drop a buffer's last reference)
  clSetKernelArg: {
    args: ["ptr", "u32", "usize", "buffer"], // cl_kernel, cl_uint arg_index, size_t arg_size, const void *arg_value
    returns: "i32",
  },
  clSetKernelArgSVMPointer: {
    args: ["ptr", "u32", "ptr"], // cl_kernel, cl_uint arg_index, const void *arg_value
    returns: "i32",
    optional: true, // OpenCL 2.0
  },
  clSetKernelExecInfo: {
    args: ["ptr", "u32", "usize", "buffer"], // cl_kernel, cl_kernel_exec_info, size_t param_value_size, const void *param_value
    returns: "i32",
    optional: true, // OpenCL 2.0
  },
  clEnqueueNDRangeKernel: {
    args: ["ptr", "ptr", "u32", "buffer", "buffer", "buffer", "u32", "buffer", "buffer"], // cl_command_queue, cl_kernel, cl_uint work_dim, const size_t *global_work_offset, const size_t *global_work_size, const size_t *local_work_size, cl_uint num_events, const cl_event *wait_list, cl_event *event
    returns: "i32",
  },
} as const satisfies SymbolTable;

/** Native callback signatures, one trampoline each for the whole process. */
export const openclCallbacks = {
  // void (CL_CALLBACK *pfn_notify)(cl_mem memobj, void *user_data)
  memDestructor: { args: ["ptr", "id"], returns: "void", delivery: "event" },
  // void (CL_CALLBACK *pfn_free_func)(cl_command_queue queue, cl_uint num_svm_pointers, void *svm_pointers[], void *user_data)
  svmFree: { args: ["ptr", "u32", "ptr", "id"], returns: "void", delivery: "event", burst: true },
  // void (CL_CALLBACK *pfn_notify)(cl_event event, cl_int event_command_status, void *user_data)
  eventStatus: { args: ["ptr", "i32", "id"], returns: "void", delivery: "event" },
} as const satisfies CallbackTable;
