package catalog

import (
	"encoding/json"

	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/taskpoll"
)

// Durable tasks in the catalog: a task-enabled server's status and cancel
// tools are left out; its submit tool keeps its name and schema and gets
// DeerFlow's contract appended to its description. With durable tasks on,
// the built-in tools list_background_tasks, cancel_background_task and
// get_background_task are routes without a server, listed after the
// servers' tools, and the task resource template is listed.

// taskTemplate is the task resource's template in resources/templates/list.
var taskTemplate = json.RawMessage(`{"uriTemplate":"` + taskpoll.ResourcePrefix + `{task_id}","name":"durable-task","description":"A durable background task's status and result (JSON).","mimeType":"application/json"}`)

// taskRoles maps a task server's raw tool names to their toolset.
type taskRoles struct {
	submit map[string]*taskpoll.Toolset // the submit tools
	// hidden are the tools left out of the catalog: status and cancel, and
	// with durable tasks off all three, which are never exposed as
	// synchronous calls.
	hidden map[string]bool
}

// taskRolesOf returns the roles of sc's task toolsets; the zero roles when
// it has none.
func taskRolesOf(sc *config.Server, tasks bool) taskRoles {
	if sc == nil || len(sc.TaskToolsets) == 0 {
		return taskRoles{}
	}
	tr := taskRoles{submit: make(map[string]*taskpoll.Toolset), hidden: make(map[string]bool)}
	for _, ts := range sc.TaskToolsets {
		tr.submit[ts.SubmitTool] = &taskpoll.Toolset{Name: ts.Name, SubmitTool: ts.SubmitTool, StatusTool: ts.StatusTool, CancelTool: ts.CancelTool}
		tr.hidden[ts.StatusTool], tr.hidden[ts.CancelTool] = true, true
		if !tasks {
			tr.hidden[ts.SubmitTool] = true
		}
	}
	return tr
}

// reserveBuiltins reserves the built-in tools' names in c — the task
// tools with durable tasks on, connect_account with connected-account
// servers — and returns their routes, which Build lists after the
// servers' tools.
func (c *Catalog[S]) reserveBuiltins(pol *Policy, sources []Source[S]) []*Route[S] {
	var tools []json.RawMessage
	if pol.tasks {
		tools = taskpoll.BuiltinTools()
	}
	if connect := connectTool(accountServers(sources)); connect != nil {
		tools = append(tools[:len(tools):len(tools)], connect)
	}
	var out []*Route[S]
	for _, raw := range tools {
		var t struct {
			Name string `json:"name"`
		}
		_ = json.Unmarshal(raw, &t)
		r := &Route[S]{Name: t.Name, Raw: t.Name, JSON: raw, Builtin: true}
		c.routes[t.Name] = r
		out = append(out, r)
	}
	return out
}

// withContract returns a submit tool object with the contract appended to
// its description, and the outputSchema of what it answers with (the
// task's handle, not the server's own result).
func withContract(tool json.RawMessage, toolset string) json.RawMessage {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(tool, &obj); err != nil {
		return tool
	}
	var desc string
	_ = json.Unmarshal(obj["description"], &desc)
	obj["description"], _ = json.Marshal(taskpoll.SubmitDescription(desc, toolset))
	obj["outputSchema"] = taskpoll.SubmitOutputSchema
	b, err := json.Marshal(obj)
	if err != nil {
		return tool
	}
	return b
}
