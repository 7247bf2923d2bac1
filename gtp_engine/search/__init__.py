"""The tree search run on positions (mcts.py grows the trees); callers import what they use from here.

What lives where:
- settings: SearchConfig and its parts (StoppingPolicy, ChoiceConfig, NoiseConfig), ResignConfig.
- limits: StopCondition (when a search ends) and ReportSchedule (when it reports during itself).
- snapshot: MoveInfo, Snapshot, SearchResult: what a search says it found.
- searcher: Searcher, the one entry point to search a position until a stop condition, reporting on a schedule;
  BackgroundSearch runs it in a thread.
- choice: the move pickers (choose_edge, draw_edge, pick_edge, level_edge), the root's noise (add_noise), the
  level's root (restrict_root), ResignCounter.
- strength: ranks and strength levels (Rank, StrengthLevel, the TABLES by board size, parse_rank, profile_rank)
  and a level's move distribution.
- rounds: many trees grown at once and games played in lanes (play_games: self-play, gating, tuning).
- threads: evaluations in flight, the threads that compute them, the garbage collector searches run under.
"""

from gtp_engine.search.choice import ResignCounter, add_noise, choose_edge, draw_edge, pick_edge
from gtp_engine.search.limits import ReportSchedule, StopCondition
from gtp_engine.search.rounds import RoundGame, network_threads, play_games
from gtp_engine.search.searcher import BackgroundSearch, Searcher
from gtp_engine.search.settings import ChoiceConfig, NoiseConfig, ResignConfig, SearchConfig, StoppingPolicy
from gtp_engine.search.snapshot import MoveInfo, SearchResult, Snapshot, SnapshotCallback
from gtp_engine.search.strength import Rank, StrengthLevel

__all__ = [
    "BackgroundSearch", "ChoiceConfig", "MoveInfo", "NoiseConfig", "Rank", "ReportSchedule", "ResignConfig",
    "ResignCounter", "RoundGame", "SearchConfig", "SearchResult", "Searcher", "Snapshot", "SnapshotCallback",
    "StopCondition", "StoppingPolicy", "StrengthLevel", "add_noise", "choose_edge", "draw_edge", "network_threads",
    "pick_edge", "play_games",
]
