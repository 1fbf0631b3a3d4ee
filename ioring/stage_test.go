package ioring

import (
	"testing"
	"unsafe"
)

// TestStageArena: staging buffers come from the arena, page aligned and of
// their class's size, and a buffer given back is handed out again; once
// the arena is full they come from the Go heap, outside it; a class larger
// than a chunk never comes from it.
func TestStageArena(t *testing.T) {
	b := Stage(5000, 512)
	if len(b) != 5000 || cap(b) != 1<<stageMinShift {
		t.Fatalf("Stage(5000): len %d cap %d, want 5000 and %d", len(b), cap(b), 1<<stageMinShift)
	}
	if uintptr(unsafe.Pointer(&b[0]))%stageAlign != 0 {
		t.Fatalf("Stage(5000) at %p, not aligned to %d", &b[0], stageAlign)
	}
	if _, ok := stageArena.index(b); !ok {
		t.Fatal("Stage(5000) is not in the arena")
	}
	Unstage(b)
	if again := Stage(100, 512); &again[0] != &b[0] {
		t.Fatal("a buffer given back was not handed out again")
	} else {
		Unstage(again)
	}

	// Fill the arena with 1 MiB buffers: the first one it cannot give
	// comes from the heap.
	var held [][]byte
	defer func() {
		for _, h := range held {
			Unstage(h)
		}
	}()
	for range stageArenaBytes/(1<<20) + 1 {
		h := Stage(1<<20, 512)
		held = append(held, h)
		if _, ok := stageArena.index(h); !ok {
			break
		}
	}
	last := held[len(held)-1]
	if _, ok := stageArena.index(last); ok {
		t.Fatalf("%d buffers of 1 MiB all came from an arena of %d MiB", len(held), stageArenaBytes>>20)
	}
	if uintptr(unsafe.Pointer(&last[0]))%stageAlign != 0 {
		t.Fatal("a staging buffer from the heap is not aligned")
	}
	if len(stageArena.snapshot())*stageChunkBytes > stageArenaBytes {
		t.Fatalf("%d chunks of %d MiB, more than the arena's %d MiB", len(stageArena.snapshot()), stageChunkBytes>>20, stageArenaBytes>>20)
	}
	big := Stage(2*stageChunkBytes, 512)
	if _, ok := stageArena.index(big); ok {
		t.Fatal("a buffer larger than a chunk came from the arena")
	}
	Unstage(big)
}
