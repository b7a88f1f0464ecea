/* The engine's whole interface in one include: engine.h (lifecycle,
 * limits, pools), proc.h (jailed processes), kproc.h (kernels). */
#pragma once

#include "engine/engine.h"
#include "engine/kproc.h"
#include "engine/proc.h"
