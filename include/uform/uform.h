/*  uform.h: the whole public C ABI of UForm. Include this one header. */
#ifndef UFORM_UFORM_H
#define UFORM_UFORM_H
#include "uform/types.h"
#include "uform/model.h"
#include "uform/encode.h"
#include "uform/quantize.h"
#include "uform/image.h"
#include "uform/av.h"
#include "uform/train.h"
#endif
