package mcptest

import (
	"time"

	"go.uber.org/goleak"
)

// LeakCheck is goleak.Find, tried again for up to ~20 s: on a loaded
// machine a killed stdio server's pipe readers can take a while to see EOF,
// while a real leak stays.
func LeakCheck() error {
	err := goleak.Find()
	for i := 0; err != nil && i < 10; i++ {
		time.Sleep(time.Second)
		err = goleak.Find()
	}
	return err
}
