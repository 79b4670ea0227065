package main

import (
	"fmt"
	"os"
	"strings"
	"time"
)

// A scenario is one named attack. It starts the mux processes it needs
// (startMux, in dir) and prints one or more lines of figures: whether the
// mux is still alive, its goroutines, fds and RSS (mux.stats) before,
// during and after, and what other callers saw.
type scenario struct {
	name string
	run  func(bin, dir string) error
}

// scenarios lists the attacks in the order they run: issue 8's set first,
// then issue 17's, one file each (a17_*.go).
func scenarios(idleWait time.Duration) []scenario {
	return []scenario{
		{"issue8", func(bin, _ string) error { return run(bin, idleWait) }},
		{"a17-progress", attackProgress},
		{"a17-tasks", attackTasks},
		{"a17-cfgloop", attackCfgloop},
		{"a17-shares", attackShares},
		{"a17-panic", attackPanic},
		{"a17-admin", attackAdmin},
		{"a17-headers", attackHeaders},
		{"a17-subs", attackSubs},
		{"a32-labels", attackLabels},
		{"a32-jwks", attackJWKSRefetch},
		{"a32-exchange", attackExchange},
		{"a32-fixedargs", attackFixedArgs},
		{"a32-tracesample", attackTraceSampling},
		{"a32-parked-slots", attackParkedSlots},
		{"a32-completion-limits", attackCompletionLimits},
		{"a32-audit", attackAudit},
		{"a32-threads", withRedis(attackThreads)},
		{"a32-zombies", withRedis(attackZombies)},
		{"a32-caps", withRedis(attackCaps)},
	}
}

// runAll runs every scenario whose name contains only ("" for all), each in
// a fresh temporary directory, and reports the first error after the rest
// have run.
func runAll(bin string, idleWait time.Duration, only string) error {
	var first error
	for _, sc := range scenarios(idleWait) {
		if !strings.Contains(sc.name, only) {
			continue
		}
		fmt.Printf("== %s\n", sc.name)
		dir, err := os.MkdirTemp("", "attack-")
		if err != nil {
			return err
		}
		if err := sc.run(bin, dir); err != nil {
			fmt.Printf("%s: error: %v\n", sc.name, err)
			if first == nil {
				first = fmt.Errorf("%s: %w", sc.name, err)
			}
		}
		os.RemoveAll(dir)
	}
	return first
}
