"""KataGo's JSON analysis protocol (`gtp-engine analysis`): a second front end beside gtp/, for KaTrain, Ogatak and
scripts that analyse many positions. It only translates between JSON lines and the Searcher:

- settings: the KataGo config keys that apply to this engine (config file, -override-config, overrideSettings);
- query: one query line -> validated positions to analyse, or an error naming the query's id and field;
- scheduler: the priority queue and the worker threads that search, report and honour terminate;
- responses: search snapshots -> KataGo's result objects;
- engine: the line loop (queries, actions, end of input) that ties them together;
- command: KataGo's command line (`gtp-engine analysis -model NET -config FILE ...`), which builds the rest.
"""
