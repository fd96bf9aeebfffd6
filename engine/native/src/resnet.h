// resnet.h: the ResNet-50 family (resnet.cpp), registered in families.cpp.
#pragma once

#include "model.h"

namespace cs {

// ResNet-50 v1.5 as torchvision builds it; presets "50" and "tiny".
Family resnet50_family();

}  // namespace cs
