package client_test

import (
	"context"
	"fmt"

	"github.com/ctxd/ctxd/api"
	"github.com/ctxd/ctxd/client"
	"github.com/ctxd/ctxd/memory"
)

// Store a conversation, then ask for the window of the next prompt.
func Example() {
	url, stop := exampleServer() // a real server on 127.0.0.1:0
	defer stop()
	ctx := context.Background()

	c, err := client.New(url)
	if err != nil {
		panic(err)
	}
	out, err := c.Append(ctx, "demo", []api.MessageIn{
		{Role: "system", Content: "You are a deployment assistant.", Pinned: true},
		{Role: "user", Content: "The staging DB password rotates every Friday."},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println("stored", len(out.IDs), "messages")

	win, err := c.Context(ctx, "demo", api.ContextIn{Prompt: "when does the password rotate?"})
	if err != nil {
		panic(err)
	}
	for _, m := range win.Messages {
		fmt.Println(m.Source, m.Role, m.Content)
	}
	// Output:
	// stored 2 messages
	// pinned system You are a deployment assistant.
	// recent user The staging DB password rotates every Friday.
}

// Errors carry the server's code: a missing session is memory.ENOTFOUND on
// the client's side of the wire too.
func ExampleClient_Session_notFound() {
	url, stop := exampleServer()
	defer stop()
	c, err := client.New(url)
	if err != nil {
		panic(err)
	}
	_, err = c.Session(context.Background(), "nobody")
	fmt.Println(memory.ErrorCode(err) == memory.ENOTFOUND)
	fmt.Println(err)
	// Output:
	// true
	// session "nobody" not found (not_found, HTTP 404)
}

// Sessions walks every page of the listing.
func ExampleClient_Sessions() {
	url, stop := exampleServer()
	defer stop()
	ctx := context.Background()
	c, err := client.New(url)
	if err != nil {
		panic(err)
	}
	for _, id := range []string{"alpha", "beta", "gamma"} {
		if _, err := c.PutSession(ctx, id, nil); err != nil {
			panic(err)
		}
	}
	for s, err := range c.Sessions(ctx, 2) {
		if err != nil {
			panic(err)
		}
		fmt.Println(s.ID, s.State)
	}
	// Output:
	// alpha ok
	// beta ok
	// gamma ok
}
