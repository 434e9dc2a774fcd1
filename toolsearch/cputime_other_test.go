//go:build !unix

package toolsearch

// processCPU is not measured on this system.
func processCPU() int64 { return 0 }
