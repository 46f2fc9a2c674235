package observe

import (
	"fmt"
	"strconv"
	"strings"
)

// visibleDevice maps CUDA device ordinal device to the GPU NVML should
// sample, given the value of CUDA_VISIBLE_DEVICES (NVML ignores that
// variable and numbers every GPU of the machine). An empty value means
// every GPU is visible: the ordinal is the NVML index. Otherwise entry
// device of the comma-separated list names the GPU, by index or by UUID
// ("GPU-..." or "MIG-..."). The two enumerations agree when CUDA orders
// devices by PCI bus id (CUDA_DEVICE_ORDER=PCI_BUS_ID), and on machines
// whose GPUs are all the same model (CUDA's default fastest-first order
// then breaks ties by bus id).
func visibleDevice(env string, device int) (index int, uuid string, err error) {
	env = strings.TrimSpace(env)
	if env == "" {
		return device, "", nil
	}
	list := strings.Split(env, ",")
	if device < 0 || device >= len(list) {
		return 0, "", fmt.Errorf("CUDA device %d: CUDA_VISIBLE_DEVICES=%q lists %d", device, env, len(list))
	}
	e := strings.TrimSpace(list[device])
	if strings.HasPrefix(e, "GPU-") || strings.HasPrefix(e, "MIG-") {
		return 0, e, nil
	}
	n, err := strconv.Atoi(e)
	if err != nil || n < 0 {
		return 0, "", fmt.Errorf("CUDA device %d: CUDA_VISIBLE_DEVICES entry %q is neither an index nor a UUID", device, e)
	}
	return n, "", nil
}
