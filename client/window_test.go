package client

import (
	"runtime"
	"sync"
	"testing"
)

// TestWindowWakesAPublisherForABurst: a publisher at the bound waits; a
// single freed slot does not wake it, an eighth of the window does; a
// stopped window admits no one, waiting or not.
func TestWindowWakesAPublisherForABurst(t *testing.T) {
	var mu sync.Mutex
	w := newWindow(&mu, 16)
	mu.Lock()
	for i := 0; i < 16; i++ {
		if !w.acquire() {
			t.Fatal("acquire below the bound refused")
		}
	}
	mu.Unlock()
	got := waiter(&mu, &w)
	mu.Lock()
	w.release(1)
	stillWaiting := w.waiting
	mu.Unlock()
	if !stillWaiting {
		t.Fatal("one freed slot woke the publisher; want it woken for an eighth of the window")
	}
	mu.Lock()
	w.release(1) // 14 in flight: the low mark of a window of 16
	mu.Unlock()
	if ok := <-got; !ok {
		t.Fatal("the woken publisher was refused")
	}
	mu.Lock()
	for w.inflight < w.max {
		w.acquire()
	}
	mu.Unlock()
	got = waiter(&mu, &w)
	mu.Lock()
	w.stop()
	mu.Unlock()
	if ok := <-got; ok {
		t.Error("a publisher waiting when the window stopped was admitted")
	}
	mu.Lock()
	defer mu.Unlock()
	w.release(w.inflight)
	if w.acquire() {
		t.Error("a stopped window admitted a publisher")
	}
}

// waiter starts a publisher that acquires a slot of the full window w
// and returns once it waits (parked in the window's wait, which releases
// mu); its outcome comes on the channel.
func waiter(mu *sync.Mutex, w *window) chan bool {
	got := make(chan bool)
	go func() {
		mu.Lock()
		defer mu.Unlock()
		got <- w.acquire()
	}()
	for {
		mu.Lock()
		waiting := w.waiting
		mu.Unlock()
		if waiting {
			return got
		}
		runtime.Gosched()
	}
}
