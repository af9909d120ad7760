// Command echo is the real-cluster tests' server: it answers every TCP
// connection on its port with one line, "<pod name> <client address>", so
// that a client sees which pod served it and what source address the pod
// saw (ExternalTrafficPolicy=Local keeps the client's). With -dial it is
// the client instead: it prints the line the server at that address sends.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"time"
)

func main() {
	addr := flag.String("listen", ":8080", "address to listen on")
	dial := flag.String("dial", "", "address to connect to, as a client")
	flag.Parse()
	if *dial != "" {
		c, err := net.DialTimeout("tcp", *dial, 5*time.Second)
		if err != nil {
			log.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			log.Fatal(err)
		}
		fmt.Print(line)
		return
	}
	name, _ := os.Hostname()
	l, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("listening on %s as %s", l.Addr(), name)
	for {
		c, err := l.Accept()
		if err != nil {
			log.Fatal(err)
		}
		go func() {
			defer c.Close()
			fmt.Fprintf(c, "%s %s\n", name, c.RemoteAddr())
		}()
	}
}
