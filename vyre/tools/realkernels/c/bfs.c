/* bfs: breadth-first search levels from node 0 of a directed graph in CSR form.
 * Follows Rodinia 3.1 openmp/bfs/bfs.cpp: BFSGraph()'s two passes per level (expand the
 * frontier mask into the updating mask, then promote it and set `stop`), until no node
 * changes. Differences: the graph comes from the LCG (1 to 6 out-edges per node, uniform
 * targets) instead of graphgen's file; the masks are int arrays rather than bool.
 * usage: bfs OUT nodes seed */
#include "common.h"

struct Node {
    int starting;
    int no_of_edges;
};

int main(int argc, char **argv) {
    int no_of_nodes = arg_int(argc, argv, 2);
    lcg_seed((uint32_t)arg_int(argc, argv, 3));
    struct Node *h_graph_nodes = malloc(sizeof(struct Node) * no_of_nodes);
    int *h_graph_mask = calloc(no_of_nodes, sizeof(int));
    int *h_updating_graph_mask = calloc(no_of_nodes, sizeof(int));
    int *h_graph_visited = calloc(no_of_nodes, sizeof(int));
    int start = 0;
    for (int i = 0; i < no_of_nodes; i++) {
        int edgeno = 1 + lcg_int(6);
        h_graph_nodes[i].starting = start;
        h_graph_nodes[i].no_of_edges = edgeno;
        start += edgeno;
    }
    int edge_list_size = start, source = 0;
    int *h_graph_edges = malloc(sizeof(int) * edge_list_size);
    for (int i = 0; i < edge_list_size; i++) h_graph_edges[i] = lcg_int(no_of_nodes);
    h_graph_mask[source] = 1;
    h_graph_visited[source] = 1;
    int *h_cost = malloc(sizeof(int) * no_of_nodes);
    for (int i = 0; i < no_of_nodes; i++) h_cost[i] = -1;
    h_cost[source] = 0;
    int k = 0, stop;
    do {
        stop = 0;
        for (int tid = 0; tid < no_of_nodes; tid++) {
            if (h_graph_mask[tid] == 1) {
                h_graph_mask[tid] = 0;
                for (int i = h_graph_nodes[tid].starting;
                     i < (h_graph_nodes[tid].no_of_edges + h_graph_nodes[tid].starting); i++) {
                    int id = h_graph_edges[i];
                    if (!h_graph_visited[id]) {
                        h_cost[id] = h_cost[tid] + 1;
                        h_updating_graph_mask[id] = 1;
                    }
                }
            }
        }
        for (int tid = 0; tid < no_of_nodes; tid++) {
            if (h_updating_graph_mask[tid] == 1) {
                h_graph_mask[tid] = 1;
                h_graph_visited[tid] = 1;
                stop = 1;
                h_updating_graph_mask[tid] = 0;
            }
        }
        k++;
    } while (stop);
    FILE *f = out_open(argv[1]);
    out_i32(f, h_cost, no_of_nodes);
    out_i32(f, &k, 1);
    fclose(f);
    return 0;
}
