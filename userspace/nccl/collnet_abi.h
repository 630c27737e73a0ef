// SPDX-License-Identifier: Apache-2.0
/* The parts of NCCL's plugin ABI that a CollNet plugin needs, declared from
 * the layout NCCL documents for external network plugins (ext-net/,
 * net_v8.h .. net_v10.h). NCCL dlopen()s the plugin and dlsym()s a struct of
 * function pointers by a versioned name, so only the layout and the enum
 * values matter: these declarations must match NCCL's field for field.
 * Values of the enums are NCCL's public ones (nccl.h, ext-net/). */
#ifndef INCIN_NCCL_COLLNET_ABI_H
#define INCIN_NCCL_COLLNET_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The handle listen() fills and NCCL all-gathers between ranks. */
#define INCIN_NCCL_NET_HANDLE_MAXSIZE 128

/* ptrSupport / regMr type bits */
#define INCIN_NCCL_PTR_HOST 0x1
#define INCIN_NCCL_PTR_CUDA 0x2
#define INCIN_NCCL_PTR_DMABUF 0x4

typedef enum {
  incinNcclSuccess = 0,
  incinNcclUnhandledCudaError = 1,
  incinNcclSystemError = 2,
  incinNcclInternalError = 3,
  incinNcclInvalidArgument = 4,
  incinNcclInvalidUsage = 5,
  incinNcclRemoteError = 6,
} incinNcclResult;

typedef enum {
  incinNcclInt8 = 0,
  incinNcclUint8 = 1,
  incinNcclInt32 = 2,
  incinNcclUint32 = 3,
  incinNcclInt64 = 4,
  incinNcclUint64 = 5,
  incinNcclFloat16 = 6,
  incinNcclFloat32 = 7,
  incinNcclFloat64 = 8,
  incinNcclBfloat16 = 9,
} incinNcclDataType;

typedef enum {
  incinNcclSum = 0,
  incinNcclProd = 1,
  incinNcclMax = 2,
  incinNcclMin = 3,
  incinNcclAvg = 4,
} incinNcclRedOp;

typedef enum {
  INCIN_NCCL_LOG_NONE = 0,
  INCIN_NCCL_LOG_VERSION = 1,
  INCIN_NCCL_LOG_WARN = 2,
  INCIN_NCCL_LOG_INFO = 3,
  INCIN_NCCL_LOG_ABORT = 4,
  INCIN_NCCL_LOG_TRACE = 5,
} incinNcclLogLevel;

/* Subsystem flag of the logger: NCCL_INIT and NCCL_NET. */
#define INCIN_NCCL_LOG_INIT 0x1UL
#define INCIN_NCCL_LOG_NET 0x10UL

typedef void (*incinNcclLogger)(incinNcclLogLevel level, unsigned long flags, const char* file, int line,
                                const char* fmt, ...);

/* ncclNetDeviceType: HOST (0) means no device offload. */
typedef int incinNcclNetDeviceType;

/* ncclNetProperties_v8_t */
typedef struct {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int speed; /* Mbps */
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  incinNcclNetDeviceType netDeviceType;
  int netDeviceVersion;
} incinNcclProps_v8;

/* ncclNetVDeviceProps_v9_t / _v10_t */
#define INCIN_NCCL_MAX_DEVS_PER_NIC 4
typedef struct {
  int ndevs;
  int devs[INCIN_NCCL_MAX_DEVS_PER_NIC];
} incinNcclVDeviceProps;

/* ncclNetProperties_v9_t and _v10_t (the same layout) */
typedef struct {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  incinNcclNetDeviceType netDeviceType;
  int netDeviceVersion;
  incinNcclVDeviceProps vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
} incinNcclProps_v9;

/* ncclNetSGE_v8_t: one piece of a scattered buffer */
typedef struct {
  void* mhandle;
  void* address;
  uint32_t size;
} incinNcclSGE_v8;

/* ncclNetSGE_v9_t / _v10_t */
typedef struct {
  void* mhandle;
  void* address;
  size_t size;
} incinNcclSGE_v9;

/* ncclCollNet_v8_t */
typedef struct {
  const char* name;
  incinNcclResult (*init)(incinNcclLogger logFunction);
  incinNcclResult (*devices)(int* ndev);
  incinNcclResult (*getProperties)(int dev, incinNcclProps_v8* props);
  incinNcclResult (*listen)(int dev, void* handle, void** listenComm);
  incinNcclResult (*connect)(void* handles[], int nranks, int rank, void* listenComm, void** collComm);
  incinNcclResult (*reduceSupport)(incinNcclDataType dataType, incinNcclRedOp redOp, int* supported);
  incinNcclResult (*regMr)(void* collComm, void* data, size_t size, int type, void** mhandle);
  incinNcclResult (*regMrDmaBuf)(void* collComm, void* data, size_t size, int type, uint64_t offset, int fd,
                                 void** mhandle);
  incinNcclResult (*deregMr)(void* collComm, void* mhandle);
  incinNcclResult (*iallreduce)(void* collComm, void* sendData, void* recvData, int count,
                                incinNcclDataType dataType, incinNcclRedOp redOp, void* sendMhandle,
                                void* recvMhandle, void** request);
  incinNcclResult (*iallgather)(void* collComm, void* sendData, int nRecvParts, incinNcclSGE_v8* recvParts,
                                size_t bytesPerRank, size_t windowOffset, size_t windowBytes,
                                void* sendMhandle, void** request);
  incinNcclResult (*ireducescatter)(void* collComm, int nSendParts, incinNcclSGE_v8* sendParts,
                                    void* recvData, size_t bytesPerRank, size_t windowOffset,
                                    size_t windowBytes, incinNcclDataType dataType, incinNcclRedOp redOp,
                                    void* recvMhandle, void** request);
  incinNcclResult (*iflush)(void* collComm, void* data, int size, void* mhandle, void** request);
  incinNcclResult (*test)(void* request, int* done, int* size);
  incinNcclResult (*closeColl)(void* collComm);
  incinNcclResult (*closeListen)(void* listenComm);
} incinNcclCollNet_v8;

/* ncclCollNet_v9_t and ncclCollNet_v10_t (the same layout): size_t counts,
 * the v9 properties and makeVDevice at the end. */
typedef struct {
  const char* name;
  incinNcclResult (*init)(incinNcclLogger logFunction);
  incinNcclResult (*devices)(int* ndev);
  incinNcclResult (*getProperties)(int dev, incinNcclProps_v9* props);
  incinNcclResult (*listen)(int dev, void* handle, void** listenComm);
  incinNcclResult (*connect)(void* handles[], int nranks, int rank, void* listenComm, void** collComm);
  incinNcclResult (*reduceSupport)(incinNcclDataType dataType, incinNcclRedOp redOp, int* supported);
  incinNcclResult (*regMr)(void* collComm, void* data, size_t size, int type, void** mhandle);
  incinNcclResult (*regMrDmaBuf)(void* collComm, void* data, size_t size, int type, uint64_t offset, int fd,
                                 void** mhandle);
  incinNcclResult (*deregMr)(void* collComm, void* mhandle);
  incinNcclResult (*iallreduce)(void* collComm, void* sendData, void* recvData, size_t count,
                                incinNcclDataType dataType, incinNcclRedOp redOp, void* sendMhandle,
                                void* recvMhandle, void** request);
  incinNcclResult (*iallgather)(void* collComm, void* sendData, int nRecvParts, incinNcclSGE_v9* recvParts,
                                size_t bytesPerRank, size_t windowOffset, size_t windowBytes,
                                void* sendMhandle, void** request);
  incinNcclResult (*ireducescatter)(void* collComm, int nSendParts, incinNcclSGE_v9* sendParts,
                                    void* recvData, size_t bytesPerRank, size_t windowOffset,
                                    size_t windowBytes, incinNcclDataType dataType, incinNcclRedOp redOp,
                                    void* recvMhandle, void** request);
  incinNcclResult (*iflush)(void* collComm, void* data, int size, void* mhandle, void** request);
  incinNcclResult (*test)(void* request, int* done, int* size);
  incinNcclResult (*closeColl)(void* collComm);
  incinNcclResult (*closeListen)(void* listenComm);
  incinNcclResult (*makeVDevice)(int* d, incinNcclVDeviceProps* props);
} incinNcclCollNet_v9;

/* ncclNet_v8_t: the point-to-point plugin. NCCL uses a library's CollNet
 * only together with that library's net plugin. */
typedef struct {
  const char* name;
  incinNcclResult (*init)(incinNcclLogger logFunction);
  incinNcclResult (*devices)(int* ndev);
  incinNcclResult (*getProperties)(int dev, incinNcclProps_v8* props);
  incinNcclResult (*listen)(int dev, void* handle, void** listenComm);
  incinNcclResult (*connect)(int dev, void* handle, void** sendComm, void** sendDevComm);
  incinNcclResult (*accept)(void* listenComm, void** recvComm, void** recvDevComm);
  incinNcclResult (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  incinNcclResult (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                                 void** mhandle);
  incinNcclResult (*deregMr)(void* comm, void* mhandle);
  incinNcclResult (*isend)(void* sendComm, void* data, int size, int tag, void* mhandle, void** request);
  incinNcclResult (*irecv)(void* recvComm, int n, void** data, int* sizes, int* tags, void** mhandles,
                           void** request);
  incinNcclResult (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  incinNcclResult (*test)(void* request, int* done, int* sizes);
  incinNcclResult (*closeSend)(void* sendComm);
  incinNcclResult (*closeRecv)(void* recvComm);
  incinNcclResult (*closeListen)(void* listenComm);
  incinNcclResult (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  incinNcclResult (*irecvConsumed)(void* recvComm, int n, void* request);
} incinNcclNet_v8;

/* The symbols NCCL looks up (newest first). */
extern const incinNcclCollNet_v9 ncclCollNetPlugin_v10;
extern const incinNcclCollNet_v9 ncclCollNetPlugin_v9;
extern const incinNcclCollNet_v8 ncclCollNetPlugin_v8;
extern const incinNcclNet_v8 ncclNetPlugin_v8;

#ifdef __cplusplus
}
#endif

#endif /* INCIN_NCCL_COLLNET_ABI_H */
