"""AlphaGo (2016): the stages of Silver et al.'s pipeline that AlphaGo Zero dropped, on the same networks and
shards as the rest of the training package.

Terms:
- policy play (policy_play.py): games of policy networks alone, moves sampled from the policy, no search; the
  data and the matches of the two stages below.
- RL policy (policy_gradient.py): REINFORCE of a supervised policy against a pool of its earlier versions.
- value network (value_net.py): one position per game of SL, random and RL play, and a value head trained on
  them.
- rollout policy (rollout_train.py): the fast linear policy of the engine's rollouts (rollout.py), fitted to
  SGF records.
"""
