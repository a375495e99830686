# The data source (the one part that differs from the tutorials): torchvision's MNIST download is
# replaced by scikit-learn's bundled 8x8 handwritten digits, scaled to [0, 1] and centred in
# 28 x 28 images, as (image, label) pairs like torchvision's ToTensor() gives. Offline.
import numpy as np
import torch
from sklearn.datasets import load_digits
from torch.utils.data import TensorDataset

def _images(first, count):
    digits = load_digits()
    x = np.zeros((count, 1, 28, 28), dtype=np.float32)
    x[:, 0, 10:18, 10:18] = digits.images[first:first + count] / 16.0
    return TensorDataset(torch.from_numpy(x), torch.from_numpy(digits.target[first:first + count]))

train_dataset = _images(0, 640)       # 20 batches of 32
inf_dataset = _images(1024, 256)      # 8 batches of 32
