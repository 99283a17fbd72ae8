package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// stop ends the child's whole process group, grandchildren included.
func TestStopKillsTheProcessGroup(t *testing.T) {
	p := newProcs()
	defer p.stopAll()
	cmd := exec.Command("sh", "-c", "sleep 30 & echo READY x; wait")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c, err := p.start("sleeper", cmd)
	if err != nil {
		t.Fatal(err)
	}
	line, err := awaitReady(context.Background(), c, readyLine(out, "READY "), 10*time.Second)
	if err != nil || line != "x" {
		t.Fatalf("ready line %q, %v", line, err)
	}
	pgid := c.pid()
	if !groupAlive(pgid) {
		t.Fatal("the group should be running before stop")
	}
	c.stop(5 * time.Second)
	// The group may take a moment to be reaped by init after SIGKILL.
	deadline := time.Now().Add(5 * time.Second)
	for groupAlive(pgid) {
		if time.Now().After(deadline) {
			t.Fatal("process group still alive after stop")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if c.alive() || len(p.live) != 0 {
		t.Fatalf("child still tracked: alive=%v live=%d", c.alive(), len(p.live))
	}
}

// groupAlive says whether any process of the group is running; zombies
// waiting for a reaper do not count.
func groupAlive(pgid int) bool {
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		b, err := os.ReadFile("/proc/" + d.Name() + "/stat")
		if err != nil {
			continue
		}
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b)[i+1:]) // state ppid pgrp ...
		if len(f) > 2 && f[2] == strconv.Itoa(pgid) && f[0] != "Z" {
			return true
		}
	}
	return false
}

func TestAwaitReadyReportsEarlyExit(t *testing.T) {
	p := newProcs()
	defer p.stopAll()
	cmd := exec.Command("sh", "-c", "echo boom >&2; exit 3")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c, err := p.start("failing", cmd)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := awaitReady(context.Background(), c, readyLine(out, "READY"), 10*time.Second); err == nil {
		t.Fatal("a child that exits is not ready")
	}
}

func TestWaitStopsTheChildWhenContextEnds(t *testing.T) {
	p := newProcs()
	defer p.stopAll()
	c, err := p.start("sleeper", exec.Command("sleep", "30"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("wait = %v, want context.Canceled", err)
	}
	if c.alive() {
		t.Fatal("child survived its context")
	}
}
