/* The current CUDA device's properties, read once a device. */
#ifndef KTUNE_DEVICE_H
#define KTUNE_DEVICE_H

#include "ktune_table.h"

#ifdef __cplusplus
extern "C" {
#endif

ktune_status ktune__device_current(const ktune_device **device);

/* The device a spec describes, its zero limits filled from its compute capability (ktune.h). */
ktune_status ktune__device_from_spec(const ktune_device_spec *spec, ktune_device *device);

#ifdef __cplusplus
}
#endif

#endif
