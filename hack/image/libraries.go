package main

import (
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// libraryDirs are where Debian keeps the shared libraries a program loads.
var libraryDirs = []string{"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/lib64", "/lib", "/usr/lib"}

// addWithLibraries adds the host file at its own path and, for an ELF
// program, its interpreter and every library it needs, recursively; each
// under its real path and, where it differs, the name it is asked for.
func addWithLibraries(files map[string][]byte, hostPath string) error {
	real, err := filepath.EvalSymlinks(hostPath)
	if err != nil {
		return fmt.Errorf("-with %s: %w", hostPath, err)
	}
	data, err := os.ReadFile(real)
	if err != nil {
		return fmt.Errorf("-with %s: %w", hostPath, err)
	}
	for _, p := range []string{hostPath, real} {
		files[strings.TrimPrefix(p, "/")] = data
	}
	if !isELF(data) {
		return nil
	}
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("-with %s: %w", hostPath, err)
	}
	defer f.Close()
	var needed []string
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			interp := make([]byte, p.Filesz)
			if _, err := p.ReadAt(interp, 0); err != nil {
				return err
			}
			needed = append(needed, string(bytes.TrimRight(interp, "\x00")))
		}
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		return fmt.Errorf("-with %s: %w", hostPath, err)
	}
	for _, lib := range libs {
		found := ""
		for _, d := range libraryDirs {
			if _, err := os.Stat(filepath.Join(d, lib)); err == nil {
				found = filepath.Join(d, lib)
				break
			}
		}
		if found == "" {
			return fmt.Errorf("-with %s: library %s not found in %v", hostPath, lib, libraryDirs)
		}
		needed = append(needed, found)
	}
	for _, n := range needed {
		if _, done := files[strings.TrimPrefix(n, "/")]; done {
			continue
		}
		if err := addWithLibraries(files, n); err != nil {
			return err
		}
	}
	return nil
}

func isELF(data []byte) bool { return bytes.HasPrefix(data, []byte(elf.ELFMAG)) }

func sortedKeys(m map[string][]byte) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
